"""The one checkpoint reader: every checkpoint read by our code (the hub, the tools,
--pretrained-sentence-checkpoint, the analyses) and, through the hooks of
``fixes.checkpoint_hooks``, by stock fairseq (``fairseq-generate``/``-interactive --path``,
``fairseq-train --restore-file`` / ``--finetune-from-model``) goes through :func:`load_state`.
Before the file is used, every entry of its torch archive is checked against its CRC (torch
itself loads a file with overwritten bytes silently), so an unreadable or damaged file or a
checkpoint of another task fails before any model is built, with an error that names the file,
says what is wrong and how to fix it. Weights-only loading stays on (see fixes.checkpoint_allow_list):
torch's refusal of a pickle that would run code is passed on unchanged."""
import hashlib
import os
import pickle
import re
import zipfile
from typing import Dict, Optional, Sequence, Tuple

import torch
from fairseq import checkpoint_utils, utils

from fairseq_ctx.core.fixes.wrapping import stock


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


def unreadable(path: str, purpose: str, reason: str) -> str:
    size = os.path.getsize(path) if os.path.exists(path) else 0
    return (f"{purpose}: cannot read checkpoint {path} ({size} bytes; {reason}). "
            f"The file is truncated or corrupt (copied incompletely, or still being written by fairseq-train); "
            f"use another checkpoint of the run (checkpoint_last.pt, checkpoint_best.pt) or copy the file again")


def fairseq_load_checkpoint_to_cpu():
    """fairseq's own ``load_checkpoint_to_cpu`` (the plugin wraps the module attribute)."""
    return stock(checkpoint_utils, "load_checkpoint_to_cpu")


def load_state(path: str, purpose: str, arg_overrides: Optional[Dict] = None, load_on_all_ranks: bool = False) -> Dict:
    """fairseq's ``load_checkpoint_to_cpu`` of a file that passed :func:`verify`; a damaged file
    raises :class:`CheckpointError` naming it (without the chained torch error, whose text may
    advise switching weights-only loading off); so does torch's refusal of a pickle that would
    run code (:func:`code_carrying`)."""
    verify(path, purpose)
    try:
        return fairseq_load_checkpoint_to_cpu()(path, arg_overrides, load_on_all_ranks)
    except Exception as error:  # torch/pickle/zip raise many types for a damaged file
        if is_weights_only_refusal(error, path):
            raise CheckpointError(code_carrying(path, purpose, error)) from None
        if isinstance(error, KeyError) and zipfile.is_zipfile(path):
            raise CheckpointError(not_fairseq(path, purpose, f"fairseq found no {error} entry")) from error
        raise CheckpointError(unreadable(path, purpose, describe(error, path))) from None


def code_carrying(path: str, purpose: str, error: BaseException) -> str:
    """The refusal of a checkpoint whose pickle names a class outside torch's weights-only
    allow-list: what it is and what to do, instead of torch's advice to switch the check off."""
    named = re.search(r"GLOBAL ([\w.]+)", str(error))
    what = f"the pickled global {named.group(1)}" if named else "a pickled Python object"
    return (f"{purpose}: checkpoint {path} holds {what}, outside torch's weights-only allow-list: loading it could "
            f"run code, so it is refused. fairseq-train writes no such object; the file was made or changed by other "
            f"code. Do not load it with weights_only=False: use a checkpoint written by fairseq-train")


def verify(path: str, purpose: str) -> None:
    """Check every entry of a local torch archive against its CRC (overwritten or lost bytes),
    raising :class:`CheckpointError` naming the file. A file that is no zip archive (truncated,
    random bytes, torch's legacy format) is left to the loader, whose error names it."""
    if not os.path.isfile(path) or not zipfile.is_zipfile(path):
        return
    problem = damage(path)
    if problem is not None:
        raise CheckpointError(unreadable(path, purpose, problem))


_complete: Dict[str, Tuple[int, int, int]] = {}  # archives that passed the CRC check: path -> (inode, size, mtime)


def damage(path: str) -> Optional[str]:
    """Why ``path`` is not a complete checkpoint, or None. A torch zip archive is checked
    entry by entry against its CRCs (this finds truncation and overwritten bytes, which torch
    itself may load silently), once while its inode, size and modification time stay the same
    (the resume check and the load that follows read it once); any other file by loading it."""
    if os.path.getsize(path) == 0:
        return "the file is empty"
    if not zipfile.is_zipfile(path):
        try:
            fairseq_load_checkpoint_to_cpu()(path)
        except Exception as error:
            return describe(error, path)
        return None
    stat = os.stat(path)
    key, signature = os.path.realpath(path), (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if _complete.get(key) == signature:
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return f"{type(error).__name__}: {error}"
    if bad:
        return f"entry {bad} fails its CRC check: its bytes changed after the file was written"
    _complete[key] = signature
    return None


def training_progress(path: str) -> Optional[Tuple[int, int, int]]:
    """(updates, epoch, iterations into the epoch) a checkpoint was saved at, as fairseq-train
    stores them in it (``optimizer_history``, ``extra_state["train_iterator"]``), read without
    loading its tensors (torch's memory map); None for a file that cannot be read. File times
    say nothing about this: a copy (``cp -r``) gives every file the time of the copy."""
    state = _training_state(path)
    if state is None:
        return None
    history = state.get("optimizer_history") or [{}]
    iterator = (state.get("extra_state") or {}).get("train_iterator") or {}
    return (int(history[-1].get("num_updates", 0)), int(iterator.get("epoch", 0)),
            int(iterator.get("iterations_in_epoch", 0)))


def cumulative_training_seconds(path: str) -> Optional[float]:
    """fairseq's cumulative training time stored in a checkpoint (what ``--stop-time-hours`` is
    compared with, carried across restarts); None for a file that cannot be read."""
    state = _training_state(path)
    if state is None:
        return None
    return float((state.get("extra_state") or {}).get("previous_training_time", 0.0))


def _training_state(path: str) -> Optional[Dict]:
    """A checkpoint's top-level dict, its tensors memory-mapped (not read) where the file allows."""
    for mmap in (True, False):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except Exception:  # not a zip archive (mmap needs one), or damaged
            continue
        return state if isinstance(state, dict) else None
    return None


def read_checkpoint(path: str, purpose: str, arg_overrides: Optional[Dict] = None) -> Dict:
    """fairseq's ``load_checkpoint_to_cpu`` with a clear error for a missing, truncated or
    corrupt file, or a torch file that is not a fairseq checkpoint."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{purpose}: checkpoint {path} does not exist")
    state = load_state(path, purpose, arg_overrides)
    if "model" not in state or (state.get("cfg") is None and state.get("args") is None):
        raise CheckpointError(not_fairseq(path, purpose, f"it has {sorted(state)[:6]}"))
    check_finite_weights(state["model"], path, purpose)
    return state


def check_finite_weights(weights: Dict, path: str, purpose: str) -> None:
    """Refuse a checkpoint with a NaN or infinite weight: every score computed from it would be
    NaN or meaningless (contrastive accuracy 0/N, CXMI nan, rows of NaN), its checksums valid."""
    for name, tensor in weights.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                raise CheckpointError(
                    f"{purpose}: checkpoint {path} has non-finite weights ({name}: {bad} of {tensor.numel()} values "
                    f"NaN or infinite): the training diverged before it was saved, and nothing computed from it is a "
                    f"score. Use an earlier checkpoint of the run ({earlier_checkpoints(path)}) or train again (a lower "
                    f"--lr, --clip-norm)")


def earlier_checkpoints(path: str) -> str:
    """What to try instead of ``path``: the run's other checkpoints, never ``path`` itself."""
    name = os.path.basename(path)
    return "an epoch checkpoint" if name == "checkpoint_best.pt" else "checkpoint_best.pt, an epoch checkpoint"


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


def recorded_task_state(state: Dict) -> Dict:
    """What our tasks record in a checkpoint (``core.resumable_task``): ``data``, the absolute data
    directory, and ``dictionaries``, the fingerprints of the source and target dictionaries; empty
    for checkpoints of other tasks or trained before."""
    from fairseq.tasks import TASK_REGISTRY

    task, _ = task_and_arch(state)
    task_class = TASK_REGISTRY.get(task)
    recorded = (state.get("extra_state") or {}).get(task_class.__name__ if task_class else "", {})
    return recorded if isinstance(recorded, dict) else {}


def recorded_data_directory(state: Dict) -> Optional[str]:
    """The absolute data directory our tasks record when training starts (``core.resumable_task``)."""
    return recorded_task_state(state).get("data")


def stored_data_directory(state: Dict) -> Optional[str]:
    """``--data`` as fairseq stored it (as given on the command line, possibly relative)."""
    cfg = state.get("cfg")
    return cfg.task.get("data") if cfg is not None else getattr(state.get("args"), "data", None)


def resolve_data_directory(state: Dict, path: str, purpose: str, arg_overrides: Optional[Dict]) -> None:
    """Without a ``data`` override the task reads its dictionaries from the ``--data`` stored in the
    checkpoint, which fairseq keeps as given. A relative one names another directory (or none)
    wherever the checkpoint is used from elsewhere, so the absolute directory the task recorded
    is used instead whenever the stored one is relative or missing; without a record, a missing
    directory is an error saying to pass --data."""
    if arg_overrides and arg_overrides.get("data"):
        return
    data = stored_data_directory(state)
    parts = [d for d in (data or "").split(os.pathsep) if d]
    missing = [d for d in parts if not os.path.isdir(d)]
    relative = any(not os.path.isabs(d) for d in parts)
    recorded = recorded_data_directory(state)
    if not recorded:
        if missing:
            raise CheckpointError(
                f"{purpose}: checkpoint {path} was trained with the data directory '{missing[0]}', which is not a "
                f"directory from here ({os.getcwd()}), and the checkpoint does not record where fairseq-train ran; "
                f"pass --data DIR (the data directory with the dictionaries)")
        return
    if not (missing or relative):
        return
    if all(os.path.isdir(d) for d in recorded.split(os.pathsep) if d):
        if state.get("cfg") is not None:
            state["cfg"].task.data = recorded
        else:
            state["args"].data = recorded
        return
    if missing:
        raise CheckpointError(
            f"{purpose}: the data directory {recorded} recorded in checkpoint {path} does not exist; pass --data DIR "
            f"(the data directory with the dictionaries)")


def dictionary_fingerprint(dictionary) -> str:
    """``{symbols}:{sha256 of the symbols in order, 16 hex digits}``: two dictionaries with the
    same fingerprint map every symbol to the same embedding row."""
    digest = hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()[:16]
    return f"{len(dictionary)}:{digest}"


def check_dictionaries(state: Dict, path: str, purpose: str, dictionaries: Dict[str, object], where: str) -> None:
    """The ``source`` and ``target`` dictionaries read for checkpoint ``path`` (from ``where``) must
    be the ones it was trained with, when it records their fingerprints: its embedding rows are
    indexed by them, so other dictionaries would silently give every row to another word."""
    check_recorded_dictionaries(recorded_task_state(state), f"checkpoint {path}", purpose, dictionaries, where)


def first_difference(here: Sequence[str], trained: Sequence[str]) -> str:
    """The first entry in which two symbol lists differ, in words."""
    for index, (mine, theirs) in enumerate(zip(here, trained)):
        if mine != theirs:
            return f"entry {index} is {mine!r} here and {theirs!r} in training"
    return f"the first {min(len(here), len(trained))} entries agree, then one of them ends"


def check_recorded_dictionaries(recorded: Dict, checkpoint: str, purpose: str, dictionaries: Dict[str, object],
                                where: str) -> None:
    """``dictionaries`` (read from ``where``) against the fingerprints (and, when recorded, the
    symbols) that our tasks record (``recorded``: ``core.resumable_task``); raises
    :class:`CheckpointError` naming ``checkpoint``, ``where`` and the first differing entry."""
    fingerprints = recorded.get("dictionaries") or {}
    symbols = recorded.get("dictionary_symbols") or {}
    for side, dictionary in dictionaries.items():
        expected, found = fingerprints.get(side), dictionary_fingerprint(dictionary)
        if expected is not None and expected != found:
            trained = recorded.get("data")
            detail = (first_difference(dictionary.symbols, symbols[side]) if side in symbols
                      else f"fingerprints {found} vs {expected}")
            raise CheckpointError(
                f"{purpose}: the {side} dictionary read from {where} is not the one {checkpoint} was trained with "
                f"({found.split(':')[0]} symbols here, {expected.split(':')[0]} in training; {detail}): its embedding "
                f"rows would belong to other words. Use the dictionaries of the data it was trained on"
                + (f" ({trained})" if trained else "") + " (pass that data directory, or binarize with "
                f"fairseq-preprocess --srcdict/--tgtdict of its dict.*.txt)")


def load_ensemble(path: str, tasks: Optional[Sequence[str]], purpose: str, arg_overrides: Optional[Dict] = None):
    """``checkpoint_utils.load_model_ensemble_and_task`` for one checkpoint, reading it once and
    checking first that it is readable, (when ``tasks`` is given) of one of ``tasks``, and that
    the dictionaries its task reads are the ones it was trained with (before any model is built)."""
    from fairseq import tasks as fairseq_tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    state = read_checkpoint(path, purpose, arg_overrides)
    if tasks is not None:
        check_task(state, path, tasks, purpose)
    resolve_data_directory(state, path, purpose, arg_overrides)
    cfg = convert_namespace_to_omegaconf(state["args"]) if state.get("args") is not None else state["cfg"]
    task = fairseq_tasks.setup_task(cfg.task, from_checkpoint=True)
    read = task.dictionaries_read() if hasattr(task, "dictionaries_read") else {
        "source": task.source_dictionary, "target": task.target_dictionary}
    check_dictionaries(state, path, purpose, read, utils.split_paths(cfg.task.data)[0])
    return checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=arg_overrides, task=task, state=state)
