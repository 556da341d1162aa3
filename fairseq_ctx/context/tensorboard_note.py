"""fairseq's import-time note "Please install tensorboardX" (its speech tasks' writer, which nothing
here uses), kept out of every program that imports fairseq through this package: the library and
the hub as well as the command-line tools."""
import logging

SPEECH_TASK_LOGGER = "fairseq.tasks.text_to_speech"  # says "Please install tensorboardX" when fairseq is imported


class _TensorboardNote(logging.Filter):
    """Drops fairseq's import-time "Please install tensorboardX" (its speech tasks' writer, which
    nothing here uses); every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "tensorboardX" not in record.getMessage()


def quiet_tensorboard_note() -> None:
    """Keep fairseq's tensorboardX note out of a program that imports fairseq through this package
    (the hub, the library), as the tools keep it out (idempotent)."""
    if not note_is_quiet():
        logging.getLogger(SPEECH_TASK_LOGGER).addFilter(_TensorboardNote())


def loud_tensorboard_note() -> None:
    """Let the note through again (the fix switched off)."""
    speech = logging.getLogger(SPEECH_TASK_LOGGER)
    for note in [f for f in speech.filters if isinstance(f, _TensorboardNote)]:
        speech.removeFilter(note)


def note_is_quiet() -> bool:
    return any(isinstance(f, _TensorboardNote) for f in logging.getLogger(SPEECH_TASK_LOGGER).filters)
