"""Sets with each example's preceding sentences on one line (SCAT's layout) to the document layout:
the library converter, fairseq-ctx-prepare-docs' one-line-context mode, and their errors."""
from pathlib import Path

import numpy as np
import pytest

from fairseq_ctx.cli import prepare_docs
from fairseq_ctx.context.contrastive.scat import unmark
from fairseq_ctx.context.data.docids import document_positions, read_docids
from fairseq_ctx.context.data.one_line_context import OneLineContextError, convert

# SCAT's highlighted.{split}.{context.en, en, context.fr, fr}: markers, an example without English
# context, one without French context, runs of spaces
SCAT = {
    "context.en": ["I saw the table. It was near the river.", "", "The car is red.", "A book fell."],
    "en": ["<p>It</p> is old.", "<p>It</p> is new.", "<p>It</p>  is fast.", "<p>It</p> is heavy."],
    "context.fr": ["J'ai vu la <hon>table<hoff> . Elle était près de la rivière.", "Rien.", "",
                   "Un <hon>livre<hoff> est tombé."],
    "fr": ["<p>Elle</p> est vieille.", "<p>Elle</p> est neuve.", "<p>Elle</p> est rapide.", "<p>Il</p> est lourd."],
}


def write_set(directory: Path, rows=SCAT) -> dict:
    paths = {}
    for suffix, lines in rows.items():
        paths[suffix] = directory / f"highlighted.train.{suffix}"
        paths[suffix].write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return paths


def read(path: Path) -> list:
    return path.read_text(encoding="utf-8").splitlines()


def test_each_example_becomes_a_document_of_its_context_line_and_its_sentence(tmp_path):
    paths = write_set(tmp_path)
    prefix = tmp_path / "prep" / "train"
    assert convert(*(str(paths[k]) for k in ("context.en", "en", "context.fr", "fr")), str(prefix), "en", "fr",
                   clean=unmark) == (4, 6)
    assert read(Path(f"{prefix}.en")) == ["I saw the table. It was near the river.", "It is old.", "It is new.",
                                          "It is fast.", "A book fell.", "It is heavy."]
    assert read(Path(f"{prefix}.fr")) == ["J'ai vu la table . Elle était près de la rivière.", "Elle est vieille.",
                                          "Elle est neuve.", "Elle est rapide.", "Un livre est tombé.",
                                          "Il est lourd."]
    assert read(Path(f"{prefix}.docids")) == ["doc0", "doc0", "doc1", "doc2", "doc3", "doc3"]
    assert read(Path(f"{prefix}.sentence_ids")) == ["1", "2", "3", "5"]
    codes = read_docids(f"{prefix}.docids", "train", 6)
    positions = document_positions(codes)
    sentences = np.array([int(i) for i in read(Path(f"{prefix}.sentence_ids"))])
    # with --context-size 1 every example sentence that has a context line reads exactly it
    assert positions[sentences].tolist() == [1, 0, 0, 1]


def test_prepare_docs_one_line_context_mode_writes_the_same_files(tmp_path, capsys):
    paths = write_set(tmp_path)
    prepare_docs.main(["--src-context", str(paths["context.en"]), "--src-sentences", str(paths["en"]),
                       "--tgt-context", str(paths["context.fr"]), "--tgt-sentences", str(paths["fr"]),
                       "--remove-scat-markers", "--out-prefix", str(tmp_path / "cli" / "train"), "--src-lang", "en",
                       "--tgt-lang", "fr", "--doc-prefix", "scat-"])
    assert "4 examples, 6 sentence pairs written to" in capsys.readouterr().out
    convert(*(str(paths[k]) for k in ("context.en", "en", "context.fr", "fr")), str(tmp_path / "lib" / "train"),
            "en", "fr", doc_prefix="scat-", clean=unmark)
    for suffix in ("en", "fr", "docids", "sentence_ids"):
        assert read(tmp_path / "cli" / f"train.{suffix}") == read(tmp_path / "lib" / f"train.{suffix}")
    prepare_docs.main(["--src-context", str(paths["context.en"]), "--src-sentences", str(paths["en"]),
                       "--tgt-context", str(paths["context.fr"]), "--tgt-sentences", str(paths["fr"]),
                       "--out-prefix", str(tmp_path / "kept" / "train"), "--src-lang", "en", "--tgt-lang", "fr"])
    assert read(tmp_path / "kept" / "train.en")[1] == "<p>It</p> is old."  # markers stay unless asked


def test_misaligned_files_an_empty_sentence_and_mixed_modes_are_clear_errors(tmp_path, capsys):
    short = dict(SCAT, fr=SCAT["fr"][:3])
    paths = write_set(tmp_path, short)
    files = [str(paths[k]) for k in ("context.en", "en", "context.fr", "fr")]
    with pytest.raises(OneLineContextError, match=r"one line per example, but .*context\.en: 4 lines, .*train\.en: 4 "
                                                  r"lines, .*context\.fr: 4 lines, .*train\.fr: 3 lines"):
        convert(*files, str(tmp_path / "out"), "en", "fr")
    empty = write_set(tmp_path, dict(SCAT, en=["a .", "", "b .", "c ."]))
    with pytest.raises(SystemExit, match=r"fairseq-ctx-prepare-docs: .*highlighted\.train\.en:2: empty sentence"):
        prepare_docs.main(["--src-context", str(empty["context.en"]), "--src-sentences", str(empty["en"]),
                           "--tgt-context", str(empty["context.fr"]), "--tgt-sentences", str(empty["fr"]),
                           "--out-prefix", str(tmp_path / "out"), "--src-lang", "en", "--tgt-lang", "fr"])
    with pytest.raises(SystemExit) as stop:
        prepare_docs.main(["--src-docs", "a", "--tgt-docs", "b", "--src-context", "c", "--out-prefix", "p",
                           "--src-lang", "en", "--tgt-lang", "fr"])
    assert stop.value.code == 2 and "give --src-docs and --tgt-docs (documents), or all of" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="is one of the inputs"):
        prepare_docs.main(["--src-context", str(empty["context.en"]), "--src-sentences", str(empty["en"]),
                           "--tgt-context", str(empty["context.fr"]), "--tgt-sentences", str(empty["fr"]),
                           "--out-prefix", str(tmp_path / "highlighted.train"), "--src-lang", "en", "--tgt-lang",
                           "fr"])
