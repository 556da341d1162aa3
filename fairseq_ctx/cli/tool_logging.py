"""Logging of the command-line tools: their own lines at INFO on stderr, the import-time noise of
the libraries (fairseq configures the root logger at INFO while importing its speech tasks and
says "Please install tensorboardX") at WARNING. Called in a tool's ``main`` after argument
parsing and before fairseq is imported, so that fairseq's ``logging.basicConfig`` finds the
root logger configured and does nothing."""
import contextlib
import logging
import os
import sys
from typing import Iterator, Sequence

QUIET_LIBRARIES = ("fairseq", "fairseq_cli", "hydra", "matplotlib", "PIL")
# the loggers fairseq adds file handlers to: --log-file (train), preprocess.log in --destdir (preprocess)
FAIRSEQ_FILE_LOGGERS = ("fairseq_cli.train", "fairseq.logging.progress_bar", "fairseq_cli.preprocess")


def configure_tool_logging(tool: str) -> logging.Logger:
    """Configure logging for the tool named ``tool`` and return its logger (``fairseq_ctx.<tool>``).
    The level of the tool's own lines follows ``LOGLEVEL`` like fairseq's tools (default INFO)."""
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=os.environ.get("LOGLEVEL", "INFO").upper(),
                        stream=sys.stderr)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    return logging.getLogger(f"fairseq_ctx.{tool}")


@contextlib.contextmanager
def restored_logging(loggers: Sequence[str] = QUIET_LIBRARIES) -> Iterator[None]:
    """Run tools one after another in one process: on exit, the levels of ``loggers`` are as on
    entry (each of our tools quietens the libraries, :func:`configure_tool_logging`) and the file
    handlers fairseq added meanwhile (``--log-file``, ``preprocess.log``) are removed and closed."""
    levels = {name: logging.getLogger(name).level for name in loggers}
    handlers = {name: list(logging.getLogger(name).handlers) for name in FAIRSEQ_FILE_LOGGERS}
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for name, kept in handlers.items():
            logger = logging.getLogger(name)
            for handler in [h for h in logger.handlers if h not in kept]:
                logger.removeHandler(handler)
                handler.close()
