"""Embedding tools and bad input: fairseq-train end to end, fairseq-ctx-embed (order, determinism,
empty lines, unknown language), doc-classify, shared-dictionary check (xsim: tests/embedding/test_xsim.py)."""
import shutil

import numpy as np
import pytest
import torch

from tests.helpers import EMBEDDING_PAIRS, USER_DIR, run_tool
from tests.embedding_helpers import TINY_TRANSFORMER, build_embedding_model, one_torch_thread  # noqa: F401
from fairseq_ctx.embedding.doc_classify import accuracy_matrix
from fairseq_ctx.embedding.embedder import Embedder, embed_file
from fairseq_ctx.embedding.data.shared_dictionary import SharedDictionaryError


@pytest.fixture(scope="module")
def trained(multilingual_data, tmp_path_factory):
    """A tiny tmde trained for a few updates with fairseq-train and the distance constraint."""
    save_dir = tmp_path_factory.mktemp("emb_ckpt")
    result = run_tool([
        "fairseq-train", str(multilingual_data), "--user-dir", USER_DIR, "--task", "multilingual_embedding",
        "--lang-pairs", EMBEDDING_PAIRS, "--arch", "tmde", *TINY_TRANSFORMER, "--criterion", "distance_constraint",
        "--label-smoothing", "0.1", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "800", "--max-update", "6",
        "--cpu", "--seed", "1", "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--log-format", "simple",
        "--num-workers", "0", "--validate-interval-updates", "6",
    ])
    return save_dir / "checkpoint_last.pt", result.stdout + result.stderr


def test_training_logs_every_pair_validation_loss_and_distance_terms(trained):
    _, log = trained
    valid_lines = [line for line in log.splitlines() if "valid on 'valid'" in line]
    assert valid_lines
    for pair in EMBEDDING_PAIRS.split(","):
        assert f"loss_{pair} " in valid_lines[-1]
    assert all(f"| {key} " in valid_lines[-1] for key in ("d_p", "delta", "v_norm"))


def test_embed_tool_keeps_order_is_deterministic_and_handles_empty_lines(trained, multilingual_data, tmp_path):
    checkpoint, _ = trained
    lines = (multilingual_data.parent / "raw" / "test.xa").read_text().splitlines()[:30]
    lines[5] = ""
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    run_tool(["fairseq-ctx-embed", "--path", str(checkpoint), "--lang", "xa", "--input", str(tmp_path / "in.txt"),
              "--output", str(tmp_path / "a.npy")])
    run_tool(["fairseq-ctx-embed", str(checkpoint.parent), "--checkpoint-file", checkpoint.name, "--cpu", "--lang", "xa",
              "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "b.npy"), "--max-tokens", "40",
              "--chunk-lines", "7"])  # the convention: checkpoint directory + --checkpoint-file; above the --path alias
    a, b = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    assert a.shape == (30, 32) and a.dtype == np.float32
    np.testing.assert_allclose(a, b, atol=1e-5)

    embedder = Embedder(str(checkpoint), "xa")
    tag_alone = torch.tensor([embedder.task.str_tag_index, embedder.task.source_dictionary.eos()])
    np.testing.assert_allclose(a[5], embedder.embed_tokens([tag_alone])[0].numpy(), atol=1e-5)
    for i in (0, 17, 29):
        np.testing.assert_allclose(a[i], embedder.embed_tokens([embedder.encode(lines[i])])[0].numpy(), atol=1e-5)
    assert np.abs(a[0] - a[1]).max() > 1e-4


def test_embed_tool_rejects_an_unknown_language(trained, tmp_path):
    checkpoint, _ = trained
    (tmp_path / "in.txt").write_text("a b c\n")
    result = run_tool(["fairseq-ctx-embed", "--path", str(checkpoint), "--lang", "zz", "--input",
                       str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.npy")], check=False)
    assert result.returncode != 0
    assert "'zz'" in result.stderr and "pa, pb, xa" in result.stderr
    assert not (tmp_path / "out.npy").exists()


def test_embedding_truncates_documents(trained, tmp_path):
    checkpoint, _ = trained
    embedder = Embedder(str(checkpoint), "pa", max_doc_tokens=5)
    tokens = embedder.encode(" ".join(["x"] * 20))
    assert tokens.numel() == 5 + 2 and tokens[0] == embedder.task.str_tag_index


def test_dictionaries_that_differ_between_languages_fail_at_load(multilingual_data, tmp_path):
    broken = tmp_path / "data-bin"
    shutil.copytree(multilingual_data, broken, ignore=shutil.ignore_patterns("dict"))
    with open(broken / "dict.xa.txt", "a") as handle:
        handle.write("extraword 1\n")
    with pytest.raises(SharedDictionaryError, match=r"dict\.xa\.txt differs from .*dict\.pa\.txt"):
        build_embedding_model(broken, "tmde")


def test_unknown_pair_data_fails_with_the_preprocess_command(multilingual_data):
    task, _, _ = build_embedding_model(multilingual_data, "tmde")
    task.pairs = task.pairs + [("xa", "xb")]
    with pytest.raises(FileNotFoundError, match="fairseq-preprocess --source-lang xa --target-lang xb"):
        task.load_dataset("valid")


def test_doc_classify_matrix_cross_and_same():
    rng = np.random.RandomState(0)
    centres = rng.randn(3, 6) * 3
    labels = [str(i % 3) for i in range(60)]
    y = np.array([int(l) for l in labels])
    same_space = centres[y] + rng.randn(60, 6)
    shifted = -centres[y] + rng.randn(60, 6)  # language "b" lives in another space
    data = {"a": (same_space.astype(np.float32), labels), "b": (shifted.astype(np.float32), labels)}
    result = accuracy_matrix(data, data, hidden=16, epochs=100, seed=1)
    assert result["matrix"]["a-a"] > 0.9 and result["matrix"]["b-b"] > 0.9
    assert result["same"] > result["cross"] + 0.3
    assert result["all"] == pytest.approx(np.mean(list(result["matrix"].values())))


def test_embed_warns_when_the_input_is_mostly_unknown_tokens(trained, multilingual_data, tmp_path):
    """Text in another script (or not segmented like the training data) embeds to rows that look like
    embeddings; the tool names the file and the share of <unk> before embedding."""
    checkpoint, _ = trained
    (tmp_path / "other.txt").write_text("это другой текст .\nещё одна строка\n", encoding="utf-8")
    result = run_tool(["fairseq-ctx-embed", str(checkpoint), "--lang", "xa", "--input", str(tmp_path / "other.txt"),
                       "--output", str(tmp_path / "other.npy")])
    assert f"{tmp_path / 'other.txt'}: 85.7% of its first 7 tokens are <unk>" in result.stderr
    assert "pass the sentencepiece model the training data was segmented with (--spm MODEL)" in result.stderr
    result = run_tool(["fairseq-ctx-embed", str(checkpoint), "--lang", "xa", "--input",
                       str(multilingual_data.parent / "raw" / "test.xa"), "--output", str(tmp_path / "xa.npy")])
    assert "<unk>" not in result.stderr
