"""The generated multimodal demo corpus made ready for ``--task multimodal_translation``: stock
fairseq-preprocess (run in-process) of en-de with a joined dictionary and of the French second
source with its own dictionary, the binaries of both and the image features and answer keys in
one data directory."""
import shutil
from pathlib import Path
from typing import List

from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes, write_multimodal_corpus

SPLITS = ("train", "valid", "test")


def binarize_multimodal_corpus(root: Path, sizes: MultimodalCorpusSizes, seed: int = 1) -> Path:
    """Write ``root/raw`` and return ``root/data-bin`` with ``{split}.img.npy``, ``{split}.key``
    and the ``fr-de`` binaries of the second source."""
    from fairseq import options
    from fairseq_cli import preprocess

    def run(args: List[str]) -> None:
        preprocess.main(options.get_preprocessing_parser().parse_args(args))

    raw, data_bin = root / "raw", root / "data-bin"
    write_multimodal_corpus(str(raw), sizes, seed=seed)
    prefixes = ["--trainpref", str(raw / "train"), "--validpref", str(raw / "valid"), "--testpref", str(raw / "test")]
    run(["--source-lang", "en", "--target-lang", "de", *prefixes, "--destdir", str(data_bin), "--joined-dictionary",
         "--workers", "1"])
    run(["--source-lang", "fr", "--target-lang", "de", "--only-source", *prefixes, "--destdir", str(data_bin / "fr"),
         "--workers", "1"])
    for split in SPLITS:
        shutil.copy(raw / f"{split}.img.npy", data_bin / f"{split}.img.npy")
        shutil.copy(raw / f"{split}.key", data_bin / f"{split}.key")
        for ext in ("bin", "idx"):
            shutil.copy(data_bin / "fr" / f"{split}.fr-de.fr.{ext}", data_bin / f"{split}.fr-de.fr.{ext}")
    shutil.copy(data_bin / "fr" / "dict.fr.txt", data_bin / "dict.fr.txt")
    return data_bin
