"""The fixes ``checked-checkpoint-reads``, ``checkpoint-settings`` and ``resume-rules``: checkpoint
behaviour of stock fairseq tools running one of the plugin's tasks (installed with the plugin's
other fixes, :mod:`fairseq_ctx.core.fixes`; nothing runs per training step). They share the
reading of the checkpoint, so they live in one module.

- Writing: every checkpoint file is written atomically and durably (``atomic_checkpoint_writes``).
- Reading: a truncated, corrupt, empty or CRC-failing file given to ``fairseq-generate
  --path``, ``fairseq-interactive --path``, ``fairseq-train --restore-file`` /
  ``--finetune-from-model`` (or any fairseq loader) raises the same
  :class:`~fairseq_ctx.core.checkpoint_loading.CheckpointError` as our own tools, naming the
  file and the option, instead of torch's error (which for random bytes advises switching
  weights-only loading off) or a model with damaged weights.
- Resuming: when ``fairseq-train`` resumes from ``checkpoint_last.pt`` (the default
  ``--restore-file``) and that file is damaged, it says so and resumes from the newest
  complete checkpoint in ``--save-dir`` (newest by the updates stored in it, not by file time),
  or stops naming the file and what to do when there is none. Every rank decides from the files
  alone, so data-parallel ranks agree.
- Restarting a ``--restore-file X`` command: when ``--save-dir`` already holds the run's own
  ``checkpoint_last.pt``, stock fairseq loads X again at every restart and silently throws away
  the updates trained since; the run resumes from its own checkpoint instead (as fairseq's
  ``--continue-once X`` does; the ``--reset-*`` options were for X and are not applied), with a
  warning naming both files. To start over from X, move checkpoint_last.pt away.
- Re-running a finished command: when the checkpoint training resumes from is already at
  ``--max-update``, fairseq would train one more update and save it over
  ``checkpoint_last.pt`` and ``checkpoint_best.pt``; instead the run says so and ends (exit
  status 0) without training or writing anything.
- Task settings: ``fairseq-generate`` and ``fairseq-interactive`` build the task from their
  command line, then load ``--path`` into it. A task with ``adopt_checkpoint_settings(task_cfg,
  path)`` is shown the checkpoint's task config first, before any model is built (the file is
  still read once), so it can take the settings the model was trained with
  (``context_translation``: ``--context-size``, ``--target-context-size``;
  ``multimodal_translation``: ``--feature-inputs``, ``--extra-source-langs``, ``--extra-source-dict``).
- Dictionaries: for every checkpoint ``--path`` loads into one of our tasks (``fairseq-generate``,
  ``-interactive``, ``-validate``), the dictionaries the task read from the data directory must be
  the ones the checkpoint records (``core.resumable_task``); stock fairseq would decode with other
  ones, giving every embedding row to another word. A mismatch is refused before any model is
  built, naming both and the first differing entry (``fairseq-train``'s resume: the task's
  ``set_checkpoint_dict``).
"""
import contextlib
import contextvars
import inspect
import logging
import os
import re
from typing import Dict, Iterator, Optional, Sequence, Tuple

from fairseq import checkpoint_utils
from fairseq.file_io import PathManager
from omegaconf import open_dict

from fairseq_ctx.core.checkpoint_loading import (CheckpointError, check_dictionaries, check_finite_weights, damage,
                                                 load_state, task_and_arch, training_progress)
from fairseq_ctx.core.resumable_task import ResumableTask

logger = logging.getLogger(__name__)

DEFAULT_RESTORE_FILE = "checkpoint_last.pt"
_purpose = contextvars.ContextVar("checkpoint_purpose", default="fairseq checkpoint loading")


@contextlib.contextmanager
def loading_for(purpose: str) -> Iterator[None]:
    """Name the option that gave the checkpoint in errors raised while it is read."""
    token = _purpose.set(purpose)
    try:
        yield
    finally:
        _purpose.reset(token)


def newest_complete_checkpoint(save_dir: str, suffix: str, exclude: str) -> Optional[str]:
    """The checkpoint of ``save_dir`` (other than ``exclude``) saved at the most updates (then the
    latest epoch position, then by name) that passes :func:`damage`, or None. The order comes
    from what each checkpoint stores, not from file times, which a copy of the directory resets."""
    pattern = re.compile(r"checkpoint.*" + re.escape(suffix) + r"\.pt$")
    candidates = [os.path.join(save_dir, name) for name in os.listdir(save_dir) if pattern.fullmatch(name)]
    candidates = [path for path in candidates if os.path.isfile(path) and not os.path.samefile(path, exclude)]
    progress = {path: training_progress(path) for path in candidates}
    readable = [path for path in candidates if progress[path] is not None]
    for path in sorted(readable, key=lambda p: (progress[p], p), reverse=True):
        if damage(path) is None:
            return path
    return None


def _load_checkpoint_to_cpu(_original, path, arg_overrides=None, load_on_all_ranks=False):
    """fairseq's reader with named errors; a checkpoint with a NaN or infinite weight is refused
    before any model is built (stock fairseq-generate failed on an assertion, -validate printed
    loss nan with exit status 0, a resume ended in a loss-scale error), naming the weight."""
    state = load_state(path, _purpose.get(), arg_overrides, load_on_all_ranks)
    if isinstance(state.get("model"), dict):
        check_finite_weights(state["model"], path, _purpose.get())
    return state


def _load_model_ensemble_and_task(original, filenames, *args, **kwargs):
    call = inspect.signature(original).bind(filenames, *args, **kwargs)
    call.apply_defaults()
    options = call.arguments
    with loading_for("--path"):
        task = options["task"]
        single = len(filenames) == 1 and options["num_shards"] == 1
        if not filenames or not (isinstance(task, ResumableTask) or (task is None and single)):
            return original(**options)
        states = []
        for index, filename in enumerate(filenames):
            path = checkpoint_utils.get_maybe_sharded_checkpoint_filename(
                filename, options["suffix"], 0, options["num_shards"])
            state = options["state"] if index == 0 else None
            if state is None:
                state = checkpoint_utils.load_checkpoint_to_cpu(path, options["arg_overrides"])
                if single:
                    options["state"] = state  # fairseq reads the file once
            states.append((path, state))
        adopt = getattr(task, "adopt_checkpoint_settings", None)
        if adopt is not None:
            adopt(saved_task_config(states[0][1]), states[0][0])
        if task is not None:
            check_task_dictionaries(task, states)
            return original(**options)
        loaded = original(**options)  # the task is built from the checkpoint's own settings (fairseq-validate)
        if isinstance(loaded[-1], ResumableTask):
            check_task_dictionaries(loaded[-1], states)
        return loaded


def check_task_dictionaries(task: "ResumableTask", states: Sequence[Tuple[str, Dict]], purpose: str = "--path") -> None:
    """The dictionaries ``task`` read against those each checkpoint ``(path, state)`` of the same
    task records (a checkpoint of another task is refused by the task itself, naming its arch)."""
    from fairseq.tasks import TASK_REGISTRY

    for path, state in states:
        if TASK_REGISTRY.get(task_and_arch(state)[0]) is type(task):
            check_dictionaries(state, path, purpose, task.dictionaries_read(), task.cfg.data)


def saved_task_config(state: Dict):
    """The task config a checkpoint was trained with (also of checkpoints that store ``args``)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    if state.get("cfg") is not None:
        return state["cfg"].task
    return convert_namespace_to_omegaconf(state["args"]).task


def _load_checkpoint(original, cfg, trainer, **passthrough_args):
    suffix = trainer.checkpoint_suffix
    last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
    restore = cfg.restore_file.replace(".pt", f"{suffix}.pt") if suffix else cfg.restore_file
    if cfg.restore_file != DEFAULT_RESTORE_FILE and not PathManager.isfile(restore):
        raise CheckpointError(
            f"fairseq-train --restore-file: checkpoint {restore} does not exist (fairseq would silently train "
            f"from scratch); pass an existing checkpoint, or leave --restore-file out to resume from {last}")
    if cfg.restore_file != DEFAULT_RESTORE_FILE and os.path.isfile(last) and not os.path.samefile(restore, last):
        return resume_own_checkpoint(original, cfg, trainer, restore, last, passthrough_args)
    finetune = (cfg.finetune_from_model is not None and cfg.restore_file == DEFAULT_RESTORE_FILE
                and not PathManager.exists(last))
    if finetune and not PathManager.isfile(cfg.finetune_from_model):
        raise CheckpointError(
            f"fairseq-train --finetune-from-model: checkpoint {cfg.finetune_from_model} does not exist; pass the "
            f"checkpoint of the pretrained model (e.g. its checkpoint_best.pt)")
    if finetune and isinstance(trainer.task, ResumableTask):
        # fairseq copies the weights by position: the embedding rows must belong to the same words
        path = cfg.finetune_from_model
        check_task_dictionaries(trainer.task, [(path, load_state(path, "fairseq-train --finetune-from-model"))],
                                "fairseq-train --finetune-from-model")
    problem = damage(last) if cfg.restore_file == DEFAULT_RESTORE_FILE and os.path.isfile(last) else None
    if problem is None:
        purpose = "fairseq-train --finetune-from-model" if finetune else "fairseq-train --restore-file"
        source = last if cfg.restore_file == DEFAULT_RESTORE_FILE else restore
        with loading_for(purpose):
            return stop_if_finished(original(cfg, trainer, **passthrough_args), source, trainer)
    fallback = newest_complete_checkpoint(cfg.save_dir, suffix, exclude=last)
    if fallback is None:
        raise CheckpointError(
            f"fairseq-train: cannot resume from {last} ({problem}): the file is truncated or corrupt and "
            f"{cfg.save_dir} holds no other complete checkpoint. Move {last} away to train from scratch, or pass "
            f"--restore-file with a good copy of this run's checkpoint")
    logger.warning("=" * 80)
    logger.warning(f"CANNOT READ {last} ({problem}).")
    logger.warning(f"RESUMING FROM {fallback}, the newest complete checkpoint in {cfg.save_dir} (same as "
                   f"--restore-file {fallback}); updates after it are trained again.")
    logger.warning("=" * 80)
    saved = cfg.restore_file, cfg.finetune_from_model
    with open_dict(cfg):
        # fairseq appends the suffix to a non-default --restore-file itself
        cfg.restore_file = fallback[: -len(f"{suffix}.pt")] + ".pt" if suffix else fallback
        cfg.finetune_from_model = None  # fairseq ignores it when checkpoint_last.pt exists
        try:
            with loading_for("fairseq-train --restore-file"):
                return stop_if_finished(original(cfg, trainer, **passthrough_args), fallback, trainer)
        finally:
            cfg.restore_file, cfg.finetune_from_model = saved


RESET_OPTIONS = ("reset_optimizer", "reset_lr_scheduler", "reset_meters", "reset_dataloader")


def resume_own_checkpoint(original, cfg, trainer, restore: str, last: str, passthrough_args):
    """``--restore-file X`` given to a save dir that already holds this run's own
    ``checkpoint_last.pt``: a restart of the same command. Stock fairseq loads X again each time,
    silently discarding every update trained since; here the run resumes from its own checkpoint
    (as fairseq's ``--continue-once X`` does), completely (the ``--reset-*`` options were for X),
    and says so loudly. To start over from X, move checkpoint_last.pt away or give another --save-dir."""
    logger.warning("=" * 80)
    logger.warning(f"--restore-file {restore}, but {cfg.save_dir} already holds this run's own {last} (update "
                   f"{checkpoint_updates_text(training_progress(last))}): RESUMING FROM {last}, as a restart of this "
                   f"command must. Loading {restore} again (stock fairseq) would throw away every update trained "
                   f"since. To start over from {restore}, move {last} away or give another --save-dir.")
    logger.warning("=" * 80)
    saved = cfg.restore_file, *(getattr(cfg, name) for name in RESET_OPTIONS)
    with open_dict(cfg):
        cfg.restore_file = DEFAULT_RESTORE_FILE
        for name in RESET_OPTIONS:
            setattr(cfg, name, False)
        try:
            with loading_for("fairseq-train (resume)"):
                return stop_if_finished(original(cfg, trainer, **passthrough_args), last, trainer)
        finally:
            cfg.restore_file = saved[0]
            for name, value in zip(RESET_OPTIONS, saved[1:]):
                setattr(cfg, name, value)


def checkpoint_updates_text(progress) -> str:
    """The updates a checkpoint's training progress records, in words."""
    return "unknown" if progress is None else str(progress[0])


def stop_if_finished(loaded, checkpoint: str, trainer):
    """``loaded`` (fairseq's ``load_checkpoint`` result, read from ``checkpoint``), unless the run
    is already at ``--max-update``: fairseq checks that only after the next update, so a finished
    command run again would train one more update and overwrite checkpoint_last.pt and
    checkpoint_best.pt. Then the run ends here with exit status 0, having trained and written
    nothing."""
    max_update = trainer.cfg.optimization.max_update
    updates = trainer.get_num_updates()
    if max_update and updates >= max_update:
        logger.info(f"fairseq-train: {checkpoint} is already at {updates} updates, --max-update {max_update}: "
                    f"training is finished, nothing is trained or written. Raise --max-update to train further, or "
                    f"give another --save-dir to train anew")
        raise SystemExit(0)
    return loaded

