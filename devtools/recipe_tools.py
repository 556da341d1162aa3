"""The fairseq and fairseq-ctx tools the recipes run, called inside the recipe's Python process
with the arguments of their command lines (one interpreter, no start-up per command), each
recorded as the shell line a reader can run instead; their logs captured to a file; and files
written whole or not at all, so an interrupted run resumes."""
import contextlib
import json
import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional

# console script -> (module, function, whether it reads sys.argv instead of taking the arguments)
TOOLS = {
    "fairseq-preprocess": ("fairseq_cli.preprocess", "cli_main", True),
    "fairseq-train": ("fairseq_cli.train", "cli_main", True),
    "fairseq-generate": ("fairseq_cli.generate", "cli_main", True),
    "fairseq-ctx-prepare-docs": ("fairseq_ctx.cli.prepare_docs", "main", False),
    "fairseq-ctx-contrastive": ("fairseq_ctx.cli.contrastive", "main", False),
    "fairseq-ctx-cxmi": ("fairseq_ctx.cli.cxmi", "main", False),
    "fairseq-ctx-score": ("fairseq_ctx.cli.score", "main", False),
    "fairseq-ctx-analyze-heads": ("fairseq_ctx.cli.analyze_heads", "main", False),
}
# where the tools add log file handlers (fairseq-preprocess at every call, fairseq-train with --log-file)
FILE_LOGGERS = ("fairseq_cli.preprocess", "fairseq_cli.train", "fairseq.logging.progress_bar")
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


@dataclass
class Step:
    """A fairseq / fairseq-ctx command (a console script of :data:`TOOLS`); ``shell`` is its command
    line for the record."""

    tool: str
    argv: List[str]
    shell: str = field(init=False)

    def __post_init__(self) -> None:
        if self.tool not in TOOLS:
            raise ValueError(f"unknown tool {self.tool}; one of {', '.join(TOOLS)}")
        self.shell = shlex.join([self.tool, *self.argv])


def run(step: Step, record: Optional[Path] = None) -> None:
    """Run ``step`` in this process, its command line first appended to ``record`` when given.
    What a tool changes in the process's logging (levels, file handlers) is undone after it."""
    from fairseq_ctx.cli.tool_logging import QUIET_LIBRARIES

    logging.getLogger(__name__).info("$ %s", step.shell)
    if record is not None:
        with open(record, "a", encoding="utf-8") as commands:
            commands.write(step.shell + "\n")
    module, function, via_argv = TOOLS[step.tool]
    entry = getattr(__import__(module, fromlist=[function]), function)
    if step.tool == "fairseq-train":
        forget_best_validation()
    saved_argv = sys.argv
    levels = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
    handlers = {name: list(logging.getLogger(name).handlers) for name in FILE_LOGGERS}
    try:
        if via_argv:
            sys.argv = [step.tool, *step.argv]
            entry()
        else:
            entry(list(step.argv))
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise RuntimeError(f"{step.tool} exited with {stop.code}: {step.shell}") from None
    finally:
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


@contextlib.contextmanager
def captured_log(path: Path) -> Iterator[None]:
    """Append every log record of the enclosed steps to ``path`` (a resumed training run keeps the
    validations logged before it stopped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename, so
    ``path`` never holds part of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_json(path: Path, value: object) -> None:
    """:func:`write_whole` of ``value`` as indented JSON."""
    write_whole(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Optional[dict]:
    """The JSON object in ``path``; None when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
