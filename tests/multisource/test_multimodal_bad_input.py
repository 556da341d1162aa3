"""Bad auxiliary inputs fail before training / decoding, naming the file."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR, build_multimodal, run_tool
from fairseq_ctx.multisource.data.feature_file import FeatureInputError

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)


def copy_of(data: Path, tmp_path: Path, without=()) -> Path:
    """Symlinked copy of a data directory minus the files named in ``without``."""
    target = tmp_path / "data"
    target.mkdir()
    for entry in data.iterdir():
        if entry.is_file() and entry.name not in without:
            os.symlink(entry, target / entry.name)
    return target


def test_feature_rows_must_match_sentences(multimodal_data, tmp_path):
    data = copy_of(multimodal_data, tmp_path, without=["train.img.npy"])
    np.save(data / "train.img.npy", np.zeros((100, 3, 8), dtype=np.float32))
    with pytest.raises(FeatureInputError, match=r"train\.img\.npy has 100 rows but split 'train' has 240 sentences"):
        build_multimodal(data)


def test_ids_file_maps_sentences_to_shared_rows(multimodal_data, tmp_path):
    data = copy_of(multimodal_data, tmp_path, without=["train.img.npy"])
    rows = np.random.default_rng(0).standard_normal((10, 3, 8)).astype(np.float16)
    np.save(data / "train.img.npy", rows)
    (data / "train.img.ids").write_text("".join(f"{i % 10}\n" for i in range(240)))
    task, _, _ = build_multimodal(data)
    dataset = task.datasets["train"]
    np.testing.assert_array_equal(dataset.features["img"][23].numpy(), rows[3])
    (data / "train.img.ids").write_text("".join(f"{i % 11}\n" for i in range(240)))
    with pytest.raises(FeatureInputError, match=r"train\.img\.ids line 11: row 10 is outside"):
        build_multimodal(data)


def test_non_finite_rows_report_the_first_bad_row(multimodal_data, tmp_path):
    data = copy_of(multimodal_data, tmp_path, without=["train.img.npy"])
    features = np.zeros((240, 3, 8), dtype=np.float16)
    features[137, 2, 5] = np.inf
    features[200, 0, 0] = np.nan
    np.save(data / "train.img.npy", features)
    with pytest.raises(FeatureInputError, match=r"train\.img\.npy has NaN/inf values; first bad row index 137"):
        build_multimodal(data)


def test_feature_dimension_must_match_the_checkpoint(multimodal_data, tmp_path):
    data = copy_of(multimodal_data, tmp_path, without=["test.img.npy"])
    np.save(data / "test.img.npy", np.zeros((16, 3, 5), dtype=np.float32))
    task, model, cfg = build_multimodal(data)
    assert cfg.model.aux_input_spec == "img:feature:8:3"
    with pytest.raises(FeatureInputError, match=r"test\.img\.npy has dimension 5 but the model/checkpoint was trained with 'img' of dimension 8"):
        task.load_dataset("test")


def test_generate_fails_early_on_missing_or_mismatched_features(multimodal_data, tmp_path):
    checkpoint_dir = tmp_path / "ckpt"  # trained in this process (no interpreter start-up): the tools below are under test
    call_tool("fairseq-train", [str(multimodal_data), "--user-dir", USER_DIR, "--task", "multimodal_translation",
              "-s", "en", "-t", "de", "--feature-inputs", "img", "--arch", "hierarchical_attention_decoder",
              "--combination", "hierarchical", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
              "--decoder-ffn-embed-dim", "16", "--encoder-layers", "1", "--decoder-layers", "1",
              "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", "--share-all-embeddings",
              "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1", "--cpu",
              "--save-dir", str(checkpoint_dir), "--no-epoch-checkpoints", "--disable-validation"])
    generate = ["fairseq-generate", "--user-dir", USER_DIR, "--task", "multimodal_translation", "-s", "en", "-t", "de",
                "--feature-inputs", "img", "--path", str(checkpoint_dir / "checkpoint_last.pt"), "--gen-subset", "test",
                "--beam", "2", "--cpu", "--max-len-b", "3"]
    missing = copy_of(multimodal_data, tmp_path, without=["test.img.npy"])
    result = run_tool([generate[0], str(missing), *generate[1:]], check=False)
    assert result.returncode != 0
    assert f"feature file {missing / 'test.img.npy'} does not exist" in result.stderr
    np.save(missing / "test.img.npy", np.zeros((16, 3, 7), dtype=np.float32))
    result = run_tool([generate[0], str(missing), *generate[1:]], check=False)
    assert result.returncode != 0
    assert "test.img.npy has dimension 7 but the model/checkpoint was trained with 'img' of dimension 8" in result.stderr
    result = run_tool([generate[0], str(multimodal_data), *generate[1:]])
    assert result.stdout.count("\nH-") + result.stdout.startswith("H-") == 16

    # the tools on the same checkpoint: attention over inputs, and the adversarial re-decoding
    out = tmp_path / "plot" / "attention"
    run_tool(["fairseq-ctx-attention-plot", str(multimodal_data), "--path", str(checkpoint_dir / "checkpoint_last.pt"),
              "--feature-inputs", "img", "--sentences", "0,3", "--out", str(out)])
    plotted = json.loads(out.with_suffix(".json").read_text())
    assert plotted["inputs"] == ["source", "img"] and out.with_suffix(".png").stat().st_size > 1000
    assert plotted["combination"] == "hierarchical"  # given on the command line: a choice, written as its name
    for sentence in plotted["sentences"]:
        assert len(sentence["weights"]) == len(sentence["target"])
        np.testing.assert_allclose([sum(w) for w in sentence["weights"]], 1.0, rtol=1e-5)
    run_tool(["fairseq-ctx-adversarial", str(multimodal_data), "--path", str(checkpoint_dir / "checkpoint_last.pt"),
              "-s", "en", "-t", "de", "--feature-inputs", "img", "--key", str(multimodal_data / "test.key"), "--beam", "1",
              "--json", str(tmp_path / "adv.json"), "--cpu", "--max-len-b", "3"])
    adversarial = json.loads((tmp_path / "adv.json").read_text())
    assert set(adversarial) == {"original", "shuffled img"}
    assert all(set(r) == {"bleu", "accuracy"} for r in adversarial.values())


def test_adversarial_shuffle_permutes_feature_rows_through_the_ids_file(multimodal_data, tmp_path):
    from fairseq_ctx.multisource.adversarial import shuffle_feature

    data = tmp_path / "data"
    data.mkdir()
    shuffle_feature(str(multimodal_data), str(data), "train", "img", np.random.default_rng(0))
    for entry in multimodal_data.iterdir():
        if entry.is_file():
            os.symlink(entry, data / entry.name)
    permutation = np.loadtxt(data / "train.img.ids", dtype=np.int64)
    assert sorted(permutation) == list(range(240)) and (permutation != np.arange(240)).mean() > 0.9
    task, _, _ = build_multimodal(data)
    original = np.load(multimodal_data / "train.img.npy")
    for index in (0, 17, 239):
        np.testing.assert_array_equal(task.datasets["train"].features["img"][index].numpy(),
                                      original[permutation[index]])


def test_stock_transformer_is_refused_with_features_and_accepts_text_only_batches(multimodal_data):
    with pytest.raises(FeatureInputError, match="--arch transformer reads no auxiliary inputs"):
        build_multimodal(multimodal_data, arch="transformer")
    task, model, _ = build_multimodal(multimodal_data, arch="transformer", task_args=())
    dataset = task.datasets["train"]
    logits = model(**dataset.collater([dataset[i] for i in range(3)])["net_input"])[0]
    assert logits.shape[0] == 3
