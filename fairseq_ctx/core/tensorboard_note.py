"""fairseq's import-time note "Please install tensorboardX" (its speech tasks' writer, which nothing
here uses), kept out of every program that imports fairseq through this package: the library and
the hub as well as the command-line tools."""
import logging
import sys

SPEECH_TASK_LOGGER = "fairseq.tasks.text_to_speech"  # says "Please install tensorboardX" when fairseq is imported


class _TensorboardNote(logging.Filter):
    """Drops fairseq's import-time "Please install tensorboardX" (its speech tasks' writer, which
    nothing here uses); every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "tensorboardX" not in record.getMessage()


def quiet_tensorboard_note() -> None:
    """Keep fairseq's tensorboardX note out of a program that imports fairseq through this package
    (the hub, the library), as the tools keep it out; a no-op once fairseq is imported."""
    if "fairseq" in sys.modules:
        return
    speech = logging.getLogger(SPEECH_TASK_LOGGER)
    if not any(isinstance(f, _TensorboardNote) for f in speech.filters):
        speech.addFilter(_TensorboardNote())
