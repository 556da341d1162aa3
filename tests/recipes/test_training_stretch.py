"""devtools/training_stretch.py: a stretch ends 60 minutes of fairseq's cumulative training time
past where its run starts, and a run fine-tuned from another checkpoint starts at that
checkpoint's training time, which fairseq carries into it (``previous_training_time``): without
it, a control fine-tuned from a 2.4-hour stage 1 stopped after one update."""
import torch

from devtools.training_stretch import StretchLimit, stretch_args


def test_a_finetuned_run_ends_its_stretch_past_the_training_time_it_starts_with(tmp_path):
    stage_one = tmp_path / "checkpoint_averaged.pt"
    torch.save({"model": {}, "extra_state": {"previous_training_time": 8640.0}}, stage_one)
    last = tmp_path / "run" / "checkpoint_last.pt"
    limit = StretchLimit(60.0, 0)
    assert stretch_args(limit, last, 800) == (800, ["--stop-time-hours", "1.000000"])  # a run from scratch
    assert stretch_args(limit, last, 800, starts_from=stage_one) == (800, ["--stop-time-hours", "3.400000"])
