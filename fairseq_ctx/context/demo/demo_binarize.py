"""The generated document-level demo corpus made ready for ``--task context_translation``, the
documented way: ``fairseq-ctx-prepare-docs`` per split, stock fairseq-preprocess (joined
dictionary, run in-process), and the ``.docids`` files copied next to the binaries."""
import shutil
from pathlib import Path

from fairseq_ctx.context.data.prepare_docs import prepare
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes, write_corpus

SPLITS = ("train", "valid", "test")


def binarize_context_corpus(root: Path, sizes: CorpusSizes, seed: int = 1, setting: str = "standard") -> Path:
    """Write ``root/raw`` (documents of the corpus ``setting``), ``root/prep`` (aligned text +
    docids) and return ``root/data-bin``."""
    from fairseq import options
    from fairseq_cli import preprocess

    raw, prep, data_bin = root / "raw", root / "prep", root / "data-bin"
    write_corpus(str(raw), sizes, seed=seed, setting=setting)
    for split in SPLITS:
        prepare(str(raw / f"{split}.en"), str(raw / f"{split}.de"), str(prep / split), "en", "de", "doc")
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", "en", "--target-lang", "de", "--trainpref", str(prep / "train"),
        "--validpref", str(prep / "valid"), "--testpref", str(prep / "test"), "--destdir", str(data_bin),
        "--joined-dictionary", "--workers", "1",
    ]))
    for split in SPLITS:
        shutil.copy(prep / f"{split}.docids", data_bin / f"{split}.docids")
    return data_bin
