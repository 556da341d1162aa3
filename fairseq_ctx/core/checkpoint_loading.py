"""Checkpoints read by our own code (the hub, the tools, --pretrained-sentence-checkpoint): an
unreadable file or a checkpoint of another task fails before any model is built, with an error
that names the file, says what is wrong and how to fix it. Weights-only loading stays on (see
checkpoint_safety): torch's refusal of a pickle that would run code is passed on unchanged."""
import os
import pickle
import zipfile
from typing import Dict, Optional, Sequence, Tuple

from fairseq import checkpoint_utils


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for what it was given to."""


def _is_weights_only_refusal(error: BaseException) -> bool:
    return isinstance(error, pickle.UnpicklingError) and "Weights only load failed" in str(error)


def read_checkpoint(path: str, purpose: str, arg_overrides: Optional[Dict] = None) -> Dict:
    """fairseq's ``load_checkpoint_to_cpu`` with a clear error for a missing, truncated or
    corrupt file, or a torch file that is not a fairseq checkpoint."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{purpose}: checkpoint {path} does not exist")
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(path, arg_overrides)
    except Exception as error:  # torch/pickle/zip raise many types for a damaged file
        if _is_weights_only_refusal(error):
            raise
        if isinstance(error, KeyError) and zipfile.is_zipfile(path):
            raise CheckpointError(not_fairseq(path, purpose, f"fairseq found no {error} entry")) from error
        reason = str(error).splitlines()[0] if str(error) else "no detail"
        raise CheckpointError(
            f"{purpose}: cannot read checkpoint {path} ({os.path.getsize(path)} bytes; "
            f"{type(error).__name__}: {reason[:200]}). The file is truncated or corrupt (copied incompletely, or "
            f"still being written by fairseq-train); use another checkpoint of the run (checkpoint_last.pt, "
            f"checkpoint_best.pt) or copy the file again"
        ) from error
    if "model" not in state or (state.get("cfg") is None and state.get("args") is None):
        raise CheckpointError(not_fairseq(path, purpose, f"it has {sorted(state)[:6]}"))
    return state


def not_fairseq(path: str, purpose: str, detail: str) -> str:
    return (f"{purpose}: {path} is a torch file but not a fairseq checkpoint ({detail}; a checkpoint has 'model', "
            f"'cfg', 'optimizer_history', ...); pass a checkpoint written by fairseq-train")


def task_and_arch(state: Dict) -> Tuple[str, str]:
    """The --task and --arch a checkpoint was trained with."""
    if state.get("cfg") is not None:
        cfg = state["cfg"]
        return str(cfg.task._name), str(getattr(cfg.model, "_name", None) or getattr(cfg.model, "arch", "?"))
    args = state["args"]
    return str(args.task), str(args.arch)


def check_task(state: Dict, path: str, tasks: Sequence[str], purpose: str) -> None:
    task, arch = task_and_arch(state)
    if task not in tasks:
        raise CheckpointError(
            f"{purpose}: checkpoint {path} is a --task {task} model (--arch {arch}), but this needs a checkpoint "
            f"trained with --task {' or '.join(tasks)}; pass a checkpoint of such a model"
        )


def load_ensemble(path: str, tasks: Optional[Sequence[str]], purpose: str, arg_overrides: Optional[Dict] = None):
    """``checkpoint_utils.load_model_ensemble_and_task`` for one checkpoint, reading it once and
    checking first that it is readable and (when ``tasks`` is given) of one of ``tasks``."""
    state = read_checkpoint(path, purpose, arg_overrides)
    if tasks is not None:
        check_task(state, path, tasks, purpose)
    return checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=arg_overrides, state=state)
