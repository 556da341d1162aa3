"""Two trainings into one --save-dir overwrite each other's checkpoints through the same temporary
files (stock fairseq: a failed rename mid-save, or a checkpoint that fails its own CRC check, both
runs going on); with the plugin the second stops before its first step, naming the first."""
import os
import subprocess
import sys

import pytest

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.core.fixes.one_training_per_save_dir import SaveDirInUseError

HOLD = ("import sys; from fairseq_ctx.core.fixes.one_training_per_save_dir import lock_save_dir; lock_save_dir(sys.argv[1]); "
        "print('held', flush=True); sys.stdin.read()")


def train(data, save_dir, *extra):
    call_tool("fairseq-train", [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size",
                                "0", "--arch", "transformer", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3",
                                "--max-tokens", "300", "--max-update", "2", "--seed", "1", "--cpu", "--num-workers",
                                "0", "--disable-validation", "--no-epoch-checkpoints", "--log-format", "none",
                                "--save-dir", str(save_dir), *extra])


def test_a_second_training_into_a_save_dir_in_use_stops_before_its_first_step(tiny_data, tmp_path):
    save_dir = tmp_path / "ck"
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(save_dir)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "held\n"
        with pytest.raises(SaveDirInUseError, match=(
                rf"^--save-dir {save_dir} is in use by another training \(process {other.pid}\): two trainings in one "
                rf"save directory overwrite each other's checkpoints")):
            train(tiny_data, save_dir)
        assert os.listdir(save_dir) == []  # nothing of the second run written, and no lock file
        train(tiny_data, tmp_path / "own", "--no-save")  # a run that saves nothing takes no lock
    finally:
        other.communicate("")
    train(tiny_data, save_dir)  # the first training ended: its lock with it
    train(tiny_data, save_dir, "--max-update", "3")  # the same process again: resumes
    assert os.listdir(save_dir) == ["checkpoint_last.pt"]  # the plugin adds no file of its own
