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


def is_weights_only_refusal(error: BaseException, path: str) -> bool:
    """torch refused a complete torch file whose pickle names a class outside the allow-list.
    torch reports random bytes the same way (with advice to switch weights-only loading off),
    so a file that is not a torch zip archive counts as damaged instead."""
    return (isinstance(error, pickle.UnpicklingError) and "Weights only load failed" in str(error)
            and zipfile.is_zipfile(path))


def describe(error: BaseException, path: str) -> str:
    """``Type: first sentence`` of a load error; torch's weights-only wording (and its advice)
    for bytes that are no torch archive is replaced by what it means."""
    text = str(error).strip()
    reason = text.splitlines()[0].split(". ")[0][:200] if text else "no detail"
    if os.path.exists(path) and os.path.getsize(path) == 0:
        reason = "the file is empty"
    elif "Weights only load failed" in reason:
        reason = "not a torch checkpoint archive"
    return f"{type(error).__name__}: {reason}"


def unreadable(path: str, purpose: str, error: BaseException) -> str:
    size = os.path.getsize(path) if os.path.exists(path) else 0
    return (f"{purpose}: cannot read checkpoint {path} ({size} bytes; {describe(error, path)}). "
            f"The file is truncated or corrupt (copied incompletely, or still being written by fairseq-train); "
            f"use another checkpoint of the run (checkpoint_last.pt, checkpoint_best.pt) or copy the file again")


def fairseq_load_checkpoint_to_cpu():
    """fairseq's own ``load_checkpoint_to_cpu`` (the plugin wraps the module attribute)."""
    loader = checkpoint_utils.load_checkpoint_to_cpu
    return getattr(loader, "__wrapped__", loader)


def load_state(path: str, purpose: str, arg_overrides: Optional[Dict] = None, load_on_all_ranks: bool = False) -> Dict:
    """fairseq's ``load_checkpoint_to_cpu``; a damaged file raises :class:`CheckpointError`
    naming it (without the chained torch error, whose text may advise switching weights-only loading
    off). torch's refusal of a pickle that would run code is passed on unchanged."""
    try:
        return fairseq_load_checkpoint_to_cpu()(path, arg_overrides, load_on_all_ranks)
    except Exception as error:  # torch/pickle/zip raise many types for a damaged file
        if is_weights_only_refusal(error, path):
            raise
        if isinstance(error, KeyError) and zipfile.is_zipfile(path):
            raise CheckpointError(not_fairseq(path, purpose, f"fairseq found no {error} entry")) from error
        raise CheckpointError(unreadable(path, purpose, error)) from None


def damage(path: str) -> Optional[str]:
    """Why ``path`` is not a complete checkpoint, or None. A torch zip archive is checked
    entry by entry against its CRCs (this finds truncation and overwritten bytes, which torch
    itself may load silently); any other file by loading it."""
    if os.path.getsize(path) == 0:
        return "the file is empty"
    if not zipfile.is_zipfile(path):
        try:
            fairseq_load_checkpoint_to_cpu()(path)
        except Exception as error:
            return describe(error, path)
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return f"{type(error).__name__}: {error}"
    return f"entry {bad} fails its CRC check" if bad else None


def read_checkpoint(path: str, purpose: str, arg_overrides: Optional[Dict] = None) -> Dict:
    """fairseq's ``load_checkpoint_to_cpu`` with a clear error for a missing, truncated or
    corrupt file, or a torch file that is not a fairseq checkpoint."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{purpose}: checkpoint {path} does not exist")
    state = load_state(path, purpose, arg_overrides)
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


def recorded_data_directory(state: Dict) -> Optional[str]:
    """The absolute data directory our tasks record when training starts (``core.resumable_task``)."""
    from fairseq.tasks import TASK_REGISTRY

    task, _ = task_and_arch(state)
    task_class = TASK_REGISTRY.get(task)
    recorded = (state.get("extra_state") or {}).get(task_class.__name__ if task_class else "", {})
    return recorded.get("data") if isinstance(recorded, dict) else None


def resolve_data_directory(state: Dict, path: str, purpose: str, arg_overrides: Optional[Dict]) -> None:
    """Without a ``data`` override the task reads its dictionaries from the ``--data`` stored in the
    checkpoint, which fairseq keeps as given (possibly relative to where training ran). When
    that is not a directory from here, use the absolute one the task recorded, else stop with
    an error saying to pass --data."""
    if arg_overrides and arg_overrides.get("data"):
        return
    cfg = state.get("cfg")
    data = cfg.task.get("data") if cfg is not None else getattr(state.get("args"), "data", None)
    missing = [d for d in (data or "").split(os.pathsep) if d and not os.path.isdir(d)]
    if not missing:
        return
    recorded = recorded_data_directory(state)
    if recorded and all(os.path.isdir(d) for d in recorded.split(os.pathsep) if d):
        if cfg is not None:
            cfg.task.data = recorded
        else:
            state["args"].data = recorded
        return
    if recorded:
        raise CheckpointError(
            f"{purpose}: the data directory {recorded} recorded in checkpoint {path} does not exist; pass --data DIR "
            f"(the data directory with the dictionaries)")
    raise CheckpointError(
        f"{purpose}: checkpoint {path} was trained with the data directory '{missing[0]}', which is not a directory "
        f"from here ({os.getcwd()}), and the checkpoint does not record where fairseq-train ran; pass --data DIR "
        f"(the data directory with the dictionaries)")


def load_ensemble(path: str, tasks: Optional[Sequence[str]], purpose: str, arg_overrides: Optional[Dict] = None):
    """``checkpoint_utils.load_model_ensemble_and_task`` for one checkpoint, reading it once and
    checking first that it is readable and (when ``tasks`` is given) of one of ``tasks``."""
    state = read_checkpoint(path, purpose, arg_overrides)
    if tasks is not None:
        check_task(state, path, tasks, purpose)
    resolve_data_directory(state, path, purpose, arg_overrides)
    return checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=arg_overrides, state=state)
