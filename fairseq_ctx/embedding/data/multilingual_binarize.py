"""The documented multilingual_embedding preprocessing, run in-process: one joint dictionary
from the training text of all languages, then fairseq-preprocess per pair with that dictionary
as --srcdict/--tgtdict (README, "Multilingual document embedding")."""
from pathlib import Path
from typing import List, Sequence

from fairseq import options


def binarize_multilingual(raw: Path, data_bin: Path, pairs: Sequence[str], langs: Sequence[str]) -> Path:
    """``raw/{split}.{lang}`` text → ``data_bin`` with ``dict/dict.txt`` and every pair binarized."""
    from fairseq_cli import preprocess

    def run(args: List[str]) -> None:
        preprocess.main(options.get_preprocessing_parser().parse_args(args))

    (raw / "train.all").write_text("".join((raw / f"train.{lang}").read_text() for lang in langs))
    run(["--only-source", "--trainpref", str(raw / "train.all"), "--destdir", str(data_bin / "dict"),
         "--dict-only", "--workers", "1"])
    shared = str(data_bin / "dict" / "dict.txt")
    for pair in pairs:
        src, tgt = pair.split("-")
        run(["--source-lang", src, "--target-lang", tgt, "--trainpref", str(raw / "train"),
             "--validpref", str(raw / "valid"), "--testpref", str(raw / "test"), "--srcdict", shared,
             "--tgtdict", shared, "--destdir", str(data_bin), "--workers", "1"])
    return data_bin
