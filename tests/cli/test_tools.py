"""Console tools: corpus generator, prepare-docs, scorer, user-dir."""
import os
from collections import Counter

import pytest

from tests.helpers import run_tool

import fairseq_ctx
from fairseq_ctx.context.data.prepare_docs import prepare
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes, write_corpus
from fairseq_ctx.core.scoring import context_accuracy, score


def test_corpus_is_deterministic_and_pronouns_need_context(tmp_path):
    write_corpus(str(tmp_path / "a"), CorpusSizes(50, 5, 5), seed=7)
    write_corpus(str(tmp_path / "b"), CorpusSizes(50, 5, 5), seed=7)
    write_corpus(str(tmp_path / "c"), CorpusSizes(50, 5, 5), seed=8)
    for name in ("train.en", "train.de", "train.ctxkey"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    assert (tmp_path / "a" / "train.en").read_text() != (tmp_path / "c" / "train.en").read_text()

    src = [l for l in (tmp_path / "a" / "train.en").read_text().splitlines() if l]
    keys = (tmp_path / "a" / "train.ctxkey").read_text().splitlines()
    assert len(src) == len(keys)
    dependent = [(s, k) for s, k in zip(src, keys) if k]
    assert all(s.startswith("it ") for s, _ in dependent), "the source pronoun never reveals the gender"
    genders = Counter(k.split("|")[0] for _, k in dependent)
    assert set(genders) == {"er", "sie", "es"}
    assert max(genders.values()) / len(dependent) < 0.45, "chance accuracy must stay near 1/3"
    assert 0.2 < len(dependent) / len(src) < 0.6


def test_prepare_docs_writes_aligned_files_and_rejects_misaligned_documents(tmp_path):
    (tmp_path / "s.txt").write_text("a1\na2\n\n\nb1\n")
    (tmp_path / "t.txt").write_text("A1\nA2\n\nB1\n")
    assert prepare(str(tmp_path / "s.txt"), str(tmp_path / "t.txt"), str(tmp_path / "out/train"), "en", "de", "d") == 3
    assert (tmp_path / "out/train.en").read_text() == "a1\na2\nb1\n"
    assert (tmp_path / "out/train.de").read_text() == "A1\nA2\nB1\n"
    assert (tmp_path / "out/train.docids").read_text() == "d0\nd0\nd1\n"

    (tmp_path / "t.txt").write_text("A1\n\nB1\n")
    result = run_tool(["fairseq-ctx-prepare-docs", "--src-docs", str(tmp_path / "s.txt"), "--tgt-docs",
                       str(tmp_path / "t.txt"), "--out-prefix", str(tmp_path / "x/train"), "--src-lang", "en",
                       "--tgt-lang", "de"], check=False)
    assert result.returncode != 0 and "document 1: 2 sentences" in result.stderr
    assert not (tmp_path / "x").exists()


def test_score_counts_expected_word_without_alternatives(tmp_path):
    hyps = {0: "er ist alt .", 1: "sie ist alt .", 2: "es und er", 3: "der hund ."}
    keys = ["er|sie,es", "er|sie,es", "er|sie,es", ""]
    assert context_accuracy(hyps, keys)[:3] == (pytest.approx(1 / 3), 1, 3)
    output = tmp_path / "gen.out"
    output.write_text("".join(f"S-{i}\tx\nT-{i}\t{h}\nH-{i}\t-0.1\t{h}\n" for i, h in hyps.items()))
    (tmp_path / "key").write_text("\n".join(keys) + "\n")
    result = score(str(output), str(tmp_path / "key"))
    assert result["bleu"] == pytest.approx(100.0) and result["context_total"] == 3


def test_user_dir_prints_the_package_directory():
    printed = run_tool(["fairseq-ctx-user-dir"]).stdout.strip()
    assert printed == os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
    assert os.path.exists(os.path.join(printed, "__init__.py"))
