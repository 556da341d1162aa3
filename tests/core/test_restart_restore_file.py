"""Restarting a ``fairseq-train --restore-file X`` command never loses progress: once the save
dir holds the run's own checkpoint_last.pt, the run resumes from it (stock fairseq would load X
again and silently train the updates since X once more), saying so."""
import logging

import torch

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.core.checkpoint_loading import training_progress

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "300", "--criterion", "label_smoothed_cross_entropy",
         "--seed", "1", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
         "--log-format", "none"]


def train(data, save_dir, updates: int, *extra: str) -> None:
    call_tool("fairseq-train", [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size",
                                "0", "--arch", "transformer", *TINY_MODEL, *TRAIN, "--max-update", str(updates),
                                "--save-dir", str(save_dir), *extra])


def test_a_restarted_restore_file_command_resumes_its_own_checkpoint(tiny_data, tmp_path, caplog):
    pretrained, run = tmp_path / "pretrained", tmp_path / "run"
    train(tiny_data, pretrained, 3)
    origin = str(pretrained / "checkpoint_last.pt")
    train(tiny_data, run, 6, "--restore-file", origin, "--reset-optimizer")
    last = run / "checkpoint_last.pt"
    assert training_progress(str(last))[0] == 6
    before = last.read_bytes()
    with caplog.at_level(logging.WARNING, logger="fairseq_ctx.core.fixes.checkpoint_hooks"):
        train(tiny_data, run, 6, "--restore-file", origin, "--reset-optimizer")  # the same command, restarted
    assert last.read_bytes() == before  # finished at update 6: nothing trained again from update 3, nothing written
    assert (f"--restore-file {origin}, but {run} already holds this run's own {last} (update 6): RESUMING FROM "
            f"{last}") in caplog.text
    train(tiny_data, run, 9, "--restore-file", origin, "--reset-optimizer")  # restarted with a higher budget
    state = torch.load(last, weights_only=True)
    assert training_progress(str(last))[0] == 9
    assert state["last_optimizer_state"]["state"], "the optimizer state of the run, not reset on its restart"


def test_resuming_with_other_context_sizes_is_stated(tiny_data, tmp_path, caplog):
    run = tmp_path / "run"

    def context_run(updates: int, size: str) -> None:
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", size, "--arch", "hmce", *TINY_MODEL, *TRAIN, "--max-update",
                                    str(updates), "--save-dir", str(run)])

    context_run(2, "1")
    with caplog.at_level(logging.WARNING, logger="fairseq_ctx.core.resumable_task"):
        context_run(4, "1")
    assert "RESUMING WITH OTHER DATA SETTINGS" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="fairseq_ctx.core.resumable_task"):
        context_run(6, "2")
    assert ("RESUMING WITH OTHER DATA SETTINGS than the checkpoint was trained with: --context-size 1 until now, 2 "
            "from here on") in caplog.text
    assert training_progress(str(run / "checkpoint_last.pt"))[0] == 6
