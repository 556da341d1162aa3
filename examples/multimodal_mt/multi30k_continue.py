"""``--continue-from WORK`` of the Multi30k recipes: a run not started here continues the run of the
same name and seed in WORK (another work directory, trained with the same settings but fewer
updates) instead of starting over. Its training log, checkpoint_best.pt and checkpoint_last.pt are
copied (WORK is only read); fairseq-train then resumes from checkpoint_last.pt, which holds the
optimizer, the learning-rate schedule and the position in the data, so the run equals one run of
--max-update updates, and its validation curve starts at the beginning."""
import json
import os
import shutil
from pathlib import Path
from typing import Optional, Sequence

from devtools.recipe_tools import read_json, write_json
from devtools.checkpoint_averaging import epoch_checkpoints
from examples.multimodal_mt.multi30k_runs import ModelRun, data_difference, different_settings, record_in

MARKER = "continued_from.json"  # in the run's eval directory: what its results file records


class ContinuationError(ValueError):
    """WORK's run cannot be continued by this one; the message says why and what to do."""


def started_here(model_run: ModelRun) -> bool:
    return model_run.record() is not None or (model_run.checkpoint_dir / "checkpoint_last.pt").exists()


def continued_run(model_run: ModelRun, work: Path) -> Optional[Path]:
    """The results file of the run in ``work`` that ``model_run`` continues; None when ``work`` has
    no finished run of its name and seed (it then starts over)."""
    path = record_in(work, model_run.seed, model_run.name)
    record = read_json(path)
    if record is None:
        return None
    changed = different_settings(record["settings"], model_run.settings)
    updates, budget = record["settings"]["max_update"], model_run.settings["max_update"]
    if any(not line.startswith("max_update:") for line in changed) or updates >= budget:
        raise ContinuationError(
            f"--continue-from: {path} ({updates} updates) cannot be continued to --max-update {budget}: "
            + ("; ".join(changed) if changed else "the same budget") + "; it needs the same settings and fewer updates")
    return path


def refuse_uncontinuable(runs: Sequence[ModelRun], work: Path, program: str) -> None:
    """Exit naming the first run not started here whose run in ``work`` cannot be continued, before any work."""
    for model_run in runs:
        if not started_here(model_run):
            try:
                continued_run(model_run, work)
            except ContinuationError as error:
                raise SystemExit(f"{program}: error: {error}") from None


def continue_run(model_run: ModelRun, work: Path) -> None:
    """Copy the training log and checkpoints of the run in ``work`` that ``model_run`` (not started
    here) continues, if there is one: its epoch checkpoints (the averages of ``--average-last`` and
    its curve need every one), then checkpoint_best.pt and checkpoint_last.pt, last and whole (a
    copy interrupted before it is made again)."""
    source = continued_run(model_run, work)
    if source is None:
        return
    seed_dir = source.parent.parent
    problem = data_difference(model_run.seed_dir, seed_dir)
    if problem is not None:
        raise ContinuationError(f"--continue-from: {problem}; it cannot be continued on this run's data")
    model_run.eval_dir.mkdir(parents=True, exist_ok=True)
    model_run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(seed_dir / "eval" / model_run.name / "train.log", model_run.eval_dir / "train.log")
    epochs = sorted(epoch_checkpoints(seed_dir / "checkpoints" / model_run.name).items())
    for name in [path.name for _, path in epochs] + ["checkpoint_best.pt", "checkpoint_last.pt"]:
        partial = model_run.checkpoint_dir / f"{name}.partial"
        shutil.copyfile(seed_dir / "checkpoints" / model_run.name / name, partial)
        os.replace(partial, model_run.checkpoint_dir / name)
    write_json(model_run.eval_dir / MARKER, {"results": str(source.resolve()),
                                             "updates": read_json(source)["settings"]["max_update"]})


def continuation_of(model_run: ModelRun) -> Optional[dict]:
    """What the run continued (the results file and its updates), None when it started from scratch."""
    marker = model_run.eval_dir / MARKER
    return json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else None
