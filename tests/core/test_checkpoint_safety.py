"""Checkpoints written with --eval-bleu (numpy BLEU counts in the saved metrics) load with
weights-only loading once the plugin is imported."""
import numpy as np
import torch

from tests.helpers import TINY_MODEL, USER_DIR, run_tool


def test_eval_bleu_checkpoint_loads_weights_only(tiny_data, tmp_path):
    save_dir = tmp_path / "checkpoints"
    run_tool(["fairseq-train", str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
              "--arch", "hce", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "16",
              "--max-update", "2", "--cpu", "--save-dir", str(save_dir), "--eval-bleu",
              "--validate-interval-updates", "1", "--save-interval-updates", "1"])
    checkpoint = save_dir / "checkpoint_last.pt"
    state = torch.load(checkpoint, weights_only=True)
    model = state["cfg"]["model"]  # a plain dict: the model's options are a dataclass
    assert model["_name"] == "hce"
    run_tool(["fairseq-generate", str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
              "--path", str(checkpoint), "--gen-subset", "test", "--beam", "2", "--cpu"])


def test_numpy_metric_values_load_weights_only(tmp_path):
    """What fairseq's --eval-bleu meters store: numpy count arrays and scalars."""
    path = tmp_path / "metrics.pt"
    counts = {"_bleu_counts": np.array([3, 2, 1, 0]), "_bleu_sys_len": np.int64(7), "loss": np.float32(1.5)}
    torch.save({"extra_state": {"metrics": counts}}, path)
    loaded = torch.load(path, weights_only=True)["extra_state"]["metrics"]
    assert loaded["_bleu_counts"].tolist() == [3, 2, 1, 0] and loaded["_bleu_sys_len"] == 7
