"""The fairseq and fairseq-ctx tools the SCAT recipe runs, called in its own process with the
arguments of their command lines (one interpreter, no start-up per command), each command
appended to a ``commands.sh`` for the record."""
import logging
import shlex
import sys
from pathlib import Path
from typing import Sequence

from fairseq_ctx.cli.tool_logging import QUIET_LIBRARIES

FILE_LOGGERS = ("fairseq_cli.train", "fairseq.logging.progress_bar")  # where fairseq adds --log-file handlers
# console script -> (module, function, whether it reads sys.argv instead of an argv parameter)
TOOLS = {
    "fairseq-ctx-prepare-docs": ("fairseq_ctx.cli.prepare_docs", "main", False),
    "fairseq-preprocess": ("fairseq_cli.preprocess", "cli_main", True),
    "fairseq-train": ("fairseq_cli.train", "cli_main", True),
    "fairseq-generate": ("fairseq_cli.generate", "cli_main", True),
    "fairseq-ctx-contrastive": ("fairseq_ctx.cli.contrastive", "main", False),
    "fairseq-ctx-cxmi": ("fairseq_ctx.cli.cxmi", "main", False),
    "fairseq-ctx-score": ("fairseq_ctx.cli.score", "main", False),
}


def run_tool(commands: Path, tool: str, args: Sequence[str]) -> None:
    """Run ``tool`` (a console script of :data:`TOOLS`) with ``args``; a failure stops the recipe
    naming ``commands`` (where the command line was appended)."""
    with open(commands, "a", encoding="utf-8") as log:
        log.write(shlex.join([tool, *args]) + "\n")
    module, function, via_argv = TOOLS[tool]
    entry = getattr(__import__(module, fromlist=[function]), function)
    if tool == "fairseq-train":
        forget_best_validation()
    saved_argv = sys.argv
    levels = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
    handlers = {name: list(logging.getLogger(name).handlers) for name in FILE_LOGGERS}
    try:
        if via_argv:
            sys.argv = [tool, *args]
            entry()
        else:
            entry(list(args))
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise SystemExit(f"{tool} failed ({stop.code}); command in {commands}")
    finally:
        # one process runs every tool: undo what a tool changes in the logging setup
        # (our tools quieten fairseq's loggers; --log-file adds a file handler per run)
        sys.argv = saved_argv
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for name, kept in handlers.items():
            logger = logging.getLogger(name)
            for handler in [h for h in logger.handlers if h not in kept]:
                logger.removeHandler(handler)
                handler.close()


def forget_best_validation() -> None:
    """fairseq keeps a run's best validation score on two functions; each training starts afresh
    (a resumed one reads its own from its checkpoint)."""
    from fairseq import checkpoint_utils
    from fairseq_cli import train

    for function in (checkpoint_utils.save_checkpoint, train.should_stop_early):
        if hasattr(function, "best"):
            del function.best
