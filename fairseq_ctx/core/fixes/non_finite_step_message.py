"""The fix ``non-finite-step-message``: a first line that names the cause and the fix when a
training step's loss or gradients are not finite (installed with the plugin's other fixes,
:mod:`fairseq_ctx.core.fixes`).

fairseq's ``Trainer.train_step`` meets non-finite gradients with ``FloatingPointError("gradients
are Nan/Inf")``: it saves ``SAVE_DIR/crash.pt``, re-runs the step under its ``NanDetector`` (whose
warnings name the first module with a non-finite output) and re-raises. Under torch >= 2 the
detector's backward hooks fail on modules that return a dict (fairseq's encoders), so the step
ends in a bare ``StopIteration`` from inside torch, the ``FloatingPointError`` buried mid-traceback.
:func:`_train_step` turns either ending into one ``FloatingPointError`` whose message states the
update, the saved state and the usual remedies; the original exceptions stay chained below it.
Nothing changes for a finite step.
"""
import os

from fairseq.trainer import Trainer

from fairseq_ctx.core.fixes.attribution import spoken_by


REMEDIES = ("lower --lr or raise --warmup-updates, keep --clip-norm (e.g. 0.1-25), or train in float32 instead of "
            "--amp / --fp16; the NanDetector warnings above name the first module whose output was not finite")


def non_finite_message(update: int, save_dir: str, cause: FloatingPointError) -> str:
    """The first line for ``cause``; fairseq's own message where it is not about non-finite values
    (gradients that differ between data-parallel workers: it names its fix itself)."""
    crash = os.path.join(save_dir, "crash.pt")
    if "inconsistent between workers" in str(cause):
        return f"update {update}: {cause} (the state before this step is saved in {crash})"
    return (f"update {update}: the loss or the gradients are not finite ({cause}); the state before this step is "
            f"saved in {crash}. To go on: {REMEDIES}")


def _floating_point_cause(error: BaseException):
    """The ``FloatingPointError`` that ended the step: ``error`` itself, or the one a failing
    ``NanDetector`` re-run left as the context of its ``StopIteration``."""
    if isinstance(error, FloatingPointError):
        return error
    context = error.__context__
    return context if isinstance(error, StopIteration) and isinstance(context, FloatingPointError) else None


def _train_step(original, trainer: Trainer, *args, **kwargs):
    try:
        return original(trainer, *args, **kwargs)
    except (FloatingPointError, StopIteration) as error:
        cause = _floating_point_cause(error)
        if cause is None:
            raise
        update = trainer.get_num_updates() + 1
        raise FloatingPointError(non_finite_message(update, trainer.cfg.checkpoint.save_dir, cause)
                                 + spoken_by("non-finite-step-message")) from error

