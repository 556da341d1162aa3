"""Every change the plugin makes to the behaviour of fairseq or torch, listed in one place.

A :class:`Fix` names its target, what it changes and why, and installs, uninstalls and reports
itself. Importing the package or registering it (``--user-dir``) installs nothing. The fixes are
installed (:func:`install_fixes`) when one of the plugin's own tasks is built (fairseq-train,
-generate, -interactive, -validate with ``--task context_translation``, ``multimodal_translation``
or ``multilingual_embedding``) and when the plugin's own tools or hub read a checkpoint; for stock
tasks such as ``translation`` only when :data:`STOCK_TASKS_ENV` is 1, at registration.
:data:`OFF_ENV` holds a comma-separated list of fix names, or ``all``, never installed: there fairseq
behaves as stock fairseq. ``fairseq-ctx-options --fixes`` prints this table with each fix's state
in its process; docs/fixes.md holds the same table. Each fix is one module of this subpackage (the
three checkpoint fixes share :mod:`.checkpoint_hooks`, which reads the checkpoint once for all three).
"""
import atexit
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_ctx.core.fixes.attribution import OFF_ENV
from fairseq_ctx.core.fixes.wrapping import is_wrapped, unwrap, wrap

STOCK_TASKS_ENV = "FAIRSEQ_CTX_FIXES_FOR_STOCK_TASKS"
ALL = "all"


@dataclass(frozen=True)
class Fix:
    """One change to another library's behaviour (``install``/``uninstall`` are idempotent;
    ``active`` tells whether it is in force in this process)."""

    name: str
    target: str
    change: str
    reason: str
    install: Callable[[], None]
    uninstall: Callable[[], None]
    active: Callable[[], bool]


Hook = Tuple[object, str, Callable]


def _hook_fix(name: str, target: str, change: str, reason: str, hooks: Callable[[], Sequence[Hook]]) -> Fix:
    """A fix made of wrappers around fairseq functions or methods (:func:`~fairseq_ctx.core.fixes.wrapping.wrap`)."""

    def install() -> None:
        for hook in hooks():
            wrap(*hook)

    def uninstall() -> None:
        for hook in hooks():
            unwrap(*hook)

    return Fix(name, target, change, reason, install, uninstall, lambda: all(is_wrapped(*h) for h in hooks()))


def _checkpoint_hooks(attribute: str, wrapper: str) -> Callable[[], Sequence[Hook]]:
    def hooks() -> Sequence[Hook]:
        from fairseq import checkpoint_utils

        from fairseq_ctx.core.fixes import checkpoint_hooks

        return [(checkpoint_utils, attribute, getattr(checkpoint_hooks, wrapper))]

    return hooks


def _mixed_precision_hooks() -> Sequence[Hook]:
    from fairseq.trainer import Trainer

    from fairseq_ctx.core.fixes import cpu_mixed_precision

    return [(Trainer, "__init__", cpu_mixed_precision._init),
            (Trainer, "_build_optimizer", cpu_mixed_precision._build_optimizer)]


def _non_finite_step_hooks() -> Sequence[Hook]:
    from fairseq.trainer import Trainer

    from fairseq_ctx.core.fixes import non_finite_step_message

    return [(Trainer, "train_step", non_finite_step_message._train_step)]


def _save_dir_lock_hooks() -> Sequence[Hook]:
    from fairseq.trainer import Trainer

    from fairseq_ctx.core.fixes import one_training_per_save_dir

    return [(Trainer, "__init__", one_training_per_save_dir._init)]


def _atomic_writes() -> Fix:
    def install() -> None:
        from fairseq_ctx.core.fixes import atomic_checkpoint_writes

        atomic_checkpoint_writes.install()

    def uninstall() -> None:
        from fairseq import checkpoint_utils
        from fairseq.file_io import PathManager

        checkpoint_utils.PathManager = PathManager

    def active() -> bool:
        from fairseq import checkpoint_utils

        from fairseq_ctx.core.fixes.atomic_checkpoint_writes import AtomicCheckpointPathManager

        return checkpoint_utils.PathManager is AtomicCheckpointPathManager

    return Fix("atomic-checkpoint-writes", "fairseq.checkpoint_utils.PathManager",
               "checkpoint files are written to a temporary file, fsynced and renamed into place",
               "a run killed mid-save left a truncated checkpoint_last.pt that the next resume could not read",
               install, uninstall, active)


def _allow_list() -> Fix:
    def ours() -> List[object]:
        from fairseq_ctx.core.fixes.checkpoint_allow_list import fairseq_checkpoint_globals

        return fairseq_checkpoint_globals()

    def install() -> None:
        from fairseq_ctx.core.fixes.checkpoint_allow_list import allow_fairseq_checkpoints

        allow_fairseq_checkpoints()

    def uninstall() -> None:
        import torch.serialization as serialization

        mine = ours()
        others = [g for g in serialization.get_safe_globals() if not any(g is m for m in mine)]
        serialization.clear_safe_globals()
        serialization.add_safe_globals(others)

    def active() -> bool:
        import torch.serialization as serialization

        allowed = serialization.get_safe_globals()
        return all(any(g is m for g in allowed) for m in ours())

    return Fix("checkpoint-allow-list", "torch.serialization safe globals",
               "argparse.Namespace and numpy arrays, scalars and dtypes are allowed in weights-only loading",
               "torch >= 2.6 loads weights-only, and fairseq checkpoints hold those objects (never weights_only=False)",
               install, uninstall, active)


def _interactive_reader() -> Fix:
    def install() -> None:
        from fairseq_ctx.core.fixes import interactive_utf8_reader

        interactive_utf8_reader.install()

    def uninstall() -> None:
        from fairseq_ctx.core.fixes import interactive_utf8_reader

        interactive_utf8_reader.uninstall()

    def active() -> bool:
        from fairseq_ctx.core.fixes import interactive_utf8_reader

        return interactive_utf8_reader.installed()

    return Fix("interactive-utf8-reader", "fairseq_cli.interactive.buffered_read (when fairseq-interactive runs)",
               "input lines are decoded one by one; bytes that are not UTF-8 are named by file, line and byte",
               "fairseq-interactive stopped at such bytes with a bare UnicodeDecodeError", install, uninstall, active)


def _background_batches() -> Fix:
    def install() -> None:
        from fairseq_ctx.core.fixes.background_batch_exit import stop_background_batches

        atexit.unregister(stop_background_batches)
        atexit.register(stop_background_batches)
        _state["background-batch-exit"] = True

    def uninstall() -> None:
        from fairseq_ctx.core.fixes.background_batch_exit import stop_background_batches

        atexit.unregister(stop_background_batches)
        _state["background-batch-exit"] = False

    return Fix("background-batch-exit", "atexit: fairseq.data.iterators.BackgroundConsumer threads",
               "at exit each background batch thread finishes its batch and ends (private _max_len, _queue)",
               "a daemon thread inside torch at interpreter exit aborted fairseq-train with status 134 after saving",
               install, uninstall, lambda: _state.get("background-batch-exit", False))


_state: Dict[str, bool] = {}

FIXES: Tuple[Fix, ...] = (
    _atomic_writes(),
    _hook_fix("checked-checkpoint-reads", "fairseq.checkpoint_utils.load_checkpoint_to_cpu",
              "a truncated or corrupt checkpoint, or one with non-finite weights, is refused naming the file and "
              "what to do", "fairseq failed deep inside torch's unpickler without naming the file",
              _checkpoint_hooks("load_checkpoint_to_cpu", "_load_checkpoint_to_cpu")),
    _hook_fix("checkpoint-settings", "fairseq.checkpoint_utils.load_model_ensemble_and_task",
              "the plugin's tasks take their context sizes and inputs from the checkpoint, and every task's "
              "dictionaries are checked against the checkpoint's", "stock tools decoded silently with other settings or "
              "with dictionaries that order the words otherwise",
              _checkpoint_hooks("load_model_ensemble_and_task", "_load_model_ensemble_and_task")),
    _hook_fix("resume-rules", "fairseq.checkpoint_utils.load_checkpoint",
              "a missing --restore-file is an error, a restart resumes its own checkpoint_last.pt, a damaged one falls "
              "back to the newest complete checkpoint, a finished run exits 0 without training",
              "stock fairseq trained from scratch, or trained one more update past --max-update, without a word",
              _checkpoint_hooks("load_checkpoint", "_load_checkpoint")),
    _hook_fix("cpu-mixed-precision", "fairseq.trainer.Trainer.__init__, Trainer._build_optimizer",
              "--amp on the CPU trains the plugin's tasks under bfloat16 autocast with a CPU gradient scaler; "
              "--bf16 without torch_xla is refused; float32 and --amp checkpoints resume into each other",
              "stock --cpu --amp silently trains in float32, and --bf16 fails inside fairseq",
              _mixed_precision_hooks),
    _hook_fix("non-finite-step-message", "fairseq.trainer.Trainer.train_step",
              "a step with non-finite loss or gradients ends in one FloatingPointError naming the update, crash.pt "
              "and the remedies", "fairseq's NaN detector fails under torch >= 2 with a bare StopIteration",
              _non_finite_step_hooks),
    _hook_fix("one-training-per-save-dir", "fairseq.trainer.Trainer.__init__",
              "the first process of a training holds a flock on its --save-dir; a second training into it stops "
              "before its first step", "two trainings into one save directory overwrote each other's checkpoints",
              _save_dir_lock_hooks),
    _interactive_reader(),
    _background_batches(),
    _allow_list(),
)
BY_NAME: Dict[str, Fix] = {fix.name: fix for fix in FIXES}


def switched_off() -> List[str]:
    """The fixes :data:`OFF_ENV` switches off (every fix for ``all``); an unknown name is an error
    naming the fixes there are."""
    names = [n.strip() for n in os.environ.get(OFF_ENV, "").split(",") if n.strip()]
    if ALL in names:
        return list(BY_NAME)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"{OFF_ENV}: no fix named {', '.join(unknown)}; the fixes are {', '.join(BY_NAME)} "
                         f"(or {ALL}); fairseq-ctx-options --fixes lists them")
    return names


def install_fixes(names: Optional[Sequence[str]] = None) -> None:
    """Install the fixes ``names`` (default: every fix) that :data:`OFF_ENV` does not switch off
    (idempotent)."""
    off = switched_off()
    for fix in FIXES:
        if (names is None or fix.name in names) and fix.name not in off:
            fix.install()


def fixes_for_stock_tasks() -> bool:
    """Whether :data:`STOCK_TASKS_ENV` asks for the fixes in every task of the process (``1``)."""
    value = os.environ.get(STOCK_TASKS_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{STOCK_TASKS_ENV}={value!r}: set it to 1 (the fixes for every task, stock tasks included) "
                         f"or 0 (only for the plugin's tasks, the default)")
    return value == "1"


def listing() -> str:
    """The table of every fix (Markdown): name, target, change, reason, state in this process."""
    rows = ["| fix | target | what changes | why | active here |", "|---|---|---|---|---|"]
    for fix in FIXES:
        rows.append(f"| `{fix.name}` | `{fix.target}` | {fix.change} | {fix.reason} | "
                    f"{'yes' if fix.active() else 'no'} |")
    return "\n".join([*rows, "", f"The fixes are installed when a task of the plugin is built (for stock tasks too "
                                  f"with {STOCK_TASKS_ENV}=1). Switch fixes off with {OFF_ENV}=NAME[,NAME...] (or "
                                  f"{ALL}) in the environment of the fairseq command; with a fix off, fairseq behaves "
                                  f"there as stock fairseq."])

