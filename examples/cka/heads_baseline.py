"""The heads recipe's baseline taken from the multi-source recipe's text-only run of the same seed
(``multi30k_heads.py --baseline-from WORK``) instead of trained again: the same data preparation,
model, settings and seed, and the same loss (``--criterion head_diversity`` without a term
computes label_smoothed_cross_entropy's). The other run's files are only read: its checkpoint
directory through a link; decoding and the head analysis write into the heads recipe's work."""
import shutil
from pathlib import Path
from typing import Dict, Optional

from devtools.recipe_tools import read_json, write_json
from examples.multimodal_mt.multi30k_runs import ModelRun, data_difference, different_settings, record_in

BASELINE = "baseline"  # the variant without a term
SOURCE_NAME = "text-only"


def source_problem(work: Path, seed: int, settings: Dict[str, object]) -> Optional[str]:
    """Why seed ``seed``'s text-only run in ``work`` cannot be the baseline of a run with
    ``settings`` (None: it can)."""
    path = record_in(work, seed, SOURCE_NAME)
    record = read_json(path)
    if record is None:
        return (f"{path} does not exist: finish that run first (multi30k_multisource.py --models text-only with "
                f"this seed) or train the baseline here (without --baseline-from)")
    changed = different_settings(record["settings"], {k: v for k, v in settings.items() if k != "criterion"})
    if changed:
        return f"{path} was trained with other settings ({'; '.join(changed)})"
    return None


def adopt_baseline(model_run: ModelRun, work: Path) -> None:
    """Make ``model_run`` (the baseline, not yet trained here) seed ``model_run.seed``'s text-only
    run in ``work``: its checkpoint directory a link to that run's, its training log a copy, its
    results file that run's record (training command, validation curve, wall time) with this run's
    name and settings, ``baseline_from`` naming the record, and no test set decoded yet."""
    record_path = record_in(work, model_run.seed, SOURCE_NAME)
    source = record_path.parent.parent
    problem = source_problem(work, model_run.seed, model_run.settings)
    if problem is None:
        different = data_difference(model_run.seed_dir, source)
        problem = None if different is None else f"{different}; train the baseline here (without --baseline-from)"
    if problem is not None:
        raise SystemExit(f"--baseline-from: {problem}")
    checkpoints = model_run.checkpoint_dir
    if checkpoints.exists() or checkpoints.is_symlink():
        raise SystemExit(f"--baseline-from: {checkpoints} exists (a baseline trained here); delete it to use "
                         f"{source / 'checkpoints' / SOURCE_NAME}, or drop --baseline-from to finish it")
    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    checkpoints.symlink_to((source / "checkpoints" / SOURCE_NAME).resolve(), target_is_directory=True)
    model_run.eval_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "eval" / SOURCE_NAME / "train.log", model_run.eval_dir / "train.log")
    record = read_json(record_path)
    write_json(model_run.record_path, {**record, "name": model_run.name, "settings": model_run.settings,
                                       "test_sets": {}, "baseline_from": str(record_path.resolve())})
