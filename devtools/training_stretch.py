"""Training runs in stretches of bounded wall time (or updates) that the same command, run again,
continues exactly, so that no run is longer than a working session can keep.

A stretch is one ``fairseq-train`` call ending on time through fairseq's own ``--stop-time-hours``
(fairseq compares it with its cumulative training time, which the checkpoint carries across
restarts: the limit is set at what the checkpoint has trained so far plus the stretch), or on a
budget of updates (``--max-update`` at most that many updates past the checkpoint). Either way
fairseq saves ``checkpoint_last.pt`` with its place in the data, and the next call resumes from it
exactly: the batches of an epoch are shuffled from ``--seed`` and the epoch, and fairseq reseeds
every update from ``--seed`` plus the update number. Each stretch that ends before the run's own
budget appends a record (updates from and to, wall minutes, machine, validation losses, command)
to the results folder, so its work can be committed the moment it ends.
"""
import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from devtools.plateau_rule import checkpoint_updates

STRETCHES_FILE = "stretches.json"


@dataclass(frozen=True)
class StretchLimit:
    """How long one stretch of a run trains: ``minutes`` of fairseq's training time and/or
    ``updates`` (0: no limit of that kind)."""

    minutes: float = 0.0
    updates: int = 0


def add_stretch_args(parser: argparse.ArgumentParser, default_minutes: float = 60.0) -> None:
    parser.add_argument("--stretch-minutes", type=float, default=default_minutes,
                        help="end each training run's stretch after this many minutes of training (fairseq's "
                             "--stop-time-hours past what its checkpoint has trained), saving a checkpoint from which "
                             "the same command continues exactly; 0: no limit")
    parser.add_argument("--stretch-updates", type=int, default=0,
                        help="end each stretch after at most this many updates past its checkpoint; 0: no limit")


def stretch_limit(args: argparse.Namespace) -> StretchLimit:
    if args.stretch_minutes < 0 or args.stretch_updates < 0:
        raise ValueError(f"--stretch-minutes {args.stretch_minutes:g} and --stretch-updates {args.stretch_updates} "
                         f"must be at least 0 (0: no limit)")
    return StretchLimit(args.stretch_minutes, args.stretch_updates)


def trained_so_far(checkpoint: Path) -> Tuple[int, float]:
    """(updates, fairseq's cumulative training seconds) stored in ``checkpoint``; (0, 0) without one."""
    if not checkpoint.exists():
        return 0, 0.0
    from fairseq_ctx.core.checkpoint_loading import cumulative_training_seconds

    return checkpoint_updates(checkpoint), cumulative_training_seconds(str(checkpoint)) or 0.0


def stretch_args(limit: StretchLimit, checkpoint: Path, max_update: int,
                 starts_from: Optional[Path] = None) -> Tuple[int, List[str]]:
    """(this stretch's ``--max-update``, the fairseq-train options that end it on time) for a run
    whose budget is ``max_update`` and whose checkpoint_last is ``checkpoint``. ``starts_from``: the
    checkpoint a new run is initialised from with ``--finetune-from-model`` or ``--restore-file``,
    whose training time fairseq carries into the new run (its ``previous_training_time``): a
    stretch of a fine-tuned model ends 60 minutes past that, not past zero."""
    updates, seconds = trained_so_far(checkpoint)
    if not checkpoint.exists() and starts_from is not None and starts_from.exists():
        from fairseq_ctx.core.checkpoint_loading import cumulative_training_seconds

        seconds = cumulative_training_seconds(str(starts_from)) or 0.0
    stop = min(max_update, updates + limit.updates) if limit.updates else max_update
    on_time = ["--stop-time-hours", f"{(seconds + 60 * limit.minutes) / 3600:.6f}"] if limit.minutes else []
    return stop, on_time


def record_stretch(results: Path, record: Dict) -> None:
    """Append ``record`` (one ended stretch) to ``results/stretches.json`` (written atomically)."""
    from fairseq_ctx.core.atomic_output import write_json

    results.mkdir(parents=True, exist_ok=True)
    path = results / STRETCHES_FILE
    write_json(str(path), [*(json.loads(path.read_text()) if path.exists() else []), record])


def stretch_record(run: str, seed: int, updates: Tuple[int, int], budget: int, seconds: float, machine: str,
                   validation: Sequence[Sequence[float]], command: str) -> Dict:
    """One ended stretch: the run, the updates it went from and to of its budget, its wall minutes,
    the machine, the validation losses ``[[update, loss], …]`` logged so far, the command that
    continues it."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "run": run, "seed": seed,
            "from_update": updates[0], "to_update": updates[1], "budget": budget,
            "wall_minutes": round(seconds / 60, 1), "machine": machine, "validation_loss": [list(v) for v in validation],
            "continue_with": command}
