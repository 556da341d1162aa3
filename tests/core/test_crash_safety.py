"""Crash safety of checkpoints written by stock fairseq-train with the plugin loaded: real
SIGKILLs while a checkpoint is being written and while it is being copied to
checkpoint_last.pt leave a checkpoint_last.pt that loads; a damaged checkpoint_last.pt (as a
writer without the plugin leaves it) makes the resume fall back to the newest complete
checkpoint and continue exactly, or stop naming the file.

The killed runs are fairseq-train's own ``cli_main`` in a child process in which only the byte
pump is slowed down once (``shutil.copyfileobj`` for the copy, ``torch.save`` for the write:
half the bytes, then a marker file and a long sleep); everything else is the production path."""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import TINY_MODEL, USER_DIR
from fairseq_ctx.core.fixes.atomic_checkpoint_writes import atomic_copy
from tests.production_matrix import fairseq_train, finish, per_update, start

CHILD = r"""
import io, os, shutil, sys, time
import torch

stage, name, occurrence, marker = sys.argv[1:5]
seen = []


def stall(handle, data):
    handle.write(data[: len(data) // 2])
    handle.flush()
    open(marker, "w").close()
    time.sleep(600)


def hit(handle) -> bool:
    if os.path.basename(getattr(handle, "name", "")) == name + ".tmp":
        seen.append(1)
    return len(seen) == int(occurrence)


if stage == "copy":
    copy = shutil.copyfileobj

    def slow_copy(reader, writer, length=0):
        if hit(writer):
            stall(writer, reader.read())
        return copy(reader, writer, length)

    shutil.copyfileobj = slow_copy
else:
    save = torch.save

    def slow_save(obj, handle, *args, **kwargs):
        if hit(handle):
            buffer = io.BytesIO()
            save(obj, buffer)
            stall(handle, buffer.getvalue())
        return save(obj, handle, *args, **kwargs)

    torch.save = slow_save

from fairseq_cli.train import cli_main

sys.argv = ["fairseq-train", *sys.argv[5:]]
cli_main()
"""


def train_args(data: Path, save_dir: Path, max_update: int) -> list:
    return [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--optimizer", "adam",
            "--lr", "1e-3", "--max-tokens", "300", "--max-update", str(max_update), "--seed", "1", "--cpu",
            "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints", "--save-interval-updates", "1",
            "--save-dir", str(save_dir), "--log-format", "json", "--log-interval", "1"]


def kill_while_writing(stage: str, name: str, occurrence: int, data: Path, save_dir: Path, tmp_path: Path) -> None:
    """Run fairseq-train and SIGKILL it in the middle of writing ``name`` for the
    ``occurrence``-th time (``stage`` 'save': torch.save of the checkpoint; 'copy': the copy)."""
    marker = tmp_path / f"marker-{stage}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, stage, name, str(occurrence), str(marker),
                              *train_args(data, save_dir, 10)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    while not marker.exists():
        assert child.poll() is None, child.stdout.read().decode()[-3000:]
        assert time.time() < deadline, "the child never reached the write"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL


def updates_in(path: Path) -> int:
    state = torch.load(path, weights_only=True)
    return int(state["optimizer_history"][-1]["num_updates"])


def test_kill_during_the_copy_to_checkpoint_last_keeps_the_previous_one(tiny_data, tmp_path):
    save_dir = tmp_path / "run"
    kill_while_writing("copy", "checkpoint_last.pt", 3, tiny_data, save_dir, tmp_path)
    partial = save_dir / "checkpoint_last.pt.tmp"
    assert 0 < partial.stat().st_size < (save_dir / "checkpoint_1_3.pt").stat().st_size
    assert updates_in(save_dir / "checkpoint_last.pt") == 2
    assert updates_in(save_dir / "checkpoint_1_3.pt") == 3


def test_kill_during_the_checkpoint_write_keeps_the_previous_files(tiny_data, tmp_path):
    save_dir = tmp_path / "run"
    kill_while_writing("save", "checkpoint_1_3.pt", 1, tiny_data, save_dir, tmp_path)
    assert (save_dir / "checkpoint_1_3.pt.tmp").stat().st_size > 0
    assert not (save_dir / "checkpoint_1_3.pt").exists()
    assert updates_in(save_dir / "checkpoint_last.pt") == 2
    assert updates_in(save_dir / "checkpoint_1_2.pt") == 2


def test_kill_during_the_first_copy_leaves_no_checkpoint_last(tiny_data, tmp_path):
    save_dir = tmp_path / "run"
    kill_while_writing("copy", "checkpoint_last.pt", 1, tiny_data, save_dir, tmp_path)
    assert not (save_dir / "checkpoint_last.pt").exists()
    assert updates_in(save_dir / "checkpoint_1_1.pt") == 1


def test_damaged_checkpoint_last_resumes_from_the_newest_complete_checkpoint(tiny_data, tmp_path):
    """checkpoint_last.pt cut in half (what a kill during a plain copy leaves) and an empty
    checkpoint_1_5.pt: the resume names checkpoint_last.pt, falls back to checkpoint_1_4.pt and
    trains update 5 again exactly as the first run did."""
    save_dir = tmp_path / "run"
    first = per_update(finish(start(fairseq_train(train_args(tiny_data, save_dir, 5)))))
    last = save_dir / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    (save_dir / "checkpoint_1_5.pt").write_bytes(b"")
    log = finish(start(fairseq_train(train_args(tiny_data, save_dir, 6))))
    assert f"CANNOT READ {last} (" in log and f"RESUMING FROM {save_dir / 'checkpoint_1_4.pt'}" in log
    assert "Loaded checkpoint" in log and "@ 4 updates" in log
    resumed = per_update(log)
    assert sorted(resumed) == [5, 6]
    assert resumed[5] == pytest.approx(first[5], abs=2e-3) and first[5] != first[4]
    assert updates_in(last) == 6


def test_damaged_checkpoint_last_without_another_checkpoint_stops_naming_it(tiny_data, tmp_path):
    save_dir = tmp_path / "run"
    save_dir.mkdir()
    last = save_dir / "checkpoint_last.pt"
    last.write_bytes(random.Random(0).randbytes(4096))
    result = subprocess.run(fairseq_train(train_args(tiny_data, save_dir, 2)), capture_output=True, text=True)
    assert result.returncode != 0
    assert (f"CheckpointError: fairseq-train: cannot resume from {last} (UnpicklingError: not a torch checkpoint "
            f"archive): the file is truncated or corrupt and {save_dir} holds no other complete checkpoint") in result.stderr
    assert f"Move {last} away to train from scratch, or pass --restore-file" in result.stderr
    assert "weights_only" not in result.stderr and "num_updates" not in result.stderr
    assert sorted(p.name for p in save_dir.iterdir()) == ["checkpoint_last.pt"]


def test_atomic_copy_interrupted_leaves_the_destination_whole(tmp_path, monkeypatch):
    source, destination = tmp_path / "new.pt", tmp_path / "checkpoint_last.pt"
    source.write_bytes(b"n" * 1000)
    destination.write_bytes(b"o" * 700)

    def broken_copy(reader, writer, length=0):
        writer.write(reader.read(10))
        raise OSError("disk full")

    monkeypatch.setattr("shutil.copyfileobj", broken_copy)
    with pytest.raises(OSError, match="disk full"):
        atomic_copy(str(source), str(destination))
    assert destination.read_bytes() == b"o" * 700
    monkeypatch.undo()
    atomic_copy(str(source), str(destination))
    assert destination.read_bytes() == b"n" * 1000 and not (tmp_path / "checkpoint_last.pt.tmp").exists()
