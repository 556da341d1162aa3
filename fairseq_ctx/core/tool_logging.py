"""Logging of the command-line tools: their own lines at INFO on stderr, the import-time noise of
the libraries (fairseq configures the root logger at INFO while importing its speech tasks and
says "Please install tensorboardX") at WARNING. Called in a tool's ``main`` after argument
parsing and before fairseq is imported, so that fairseq's ``logging.basicConfig`` finds the
root logger configured and does nothing."""
import logging
import os
import sys

QUIET_LIBRARIES = ("fairseq", "fairseq_cli", "hydra", "matplotlib", "PIL")
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


def configure_tool_logging(tool: str) -> logging.Logger:
    """Configure logging for the tool named ``tool`` and return its logger (``fairseq_ctx.<tool>``).
    The level of the tool's own lines follows ``LOGLEVEL`` like fairseq's tools (default INFO)."""
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=os.environ.get("LOGLEVEL", "INFO").upper(),
                        stream=sys.stderr)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    return logging.getLogger(f"fairseq_ctx.{tool}")
