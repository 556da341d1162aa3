"""The fairseq and fairseq-ctx tools the recipes run, called inside the recipe's Python process
with the arguments of their command lines (one interpreter, no start-up per command), each
recorded as the shell line a reader can run instead; their logs captured to a file; and files
written whole or not at all, so an interrupted run resumes."""
import contextlib
import json
import logging
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional

from devtools.in_process_tools import TOOLS, call_tool, restored_logging
from devtools.machine_facts import this_machine

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
    """Run ``step`` in this process (:func:`~devtools.in_process_tools.call_tool`), its command line
    first appended to ``record`` when given; a training step logs the machine it trains on next
    (:func:`~devtools.train_log.training_machines` reads it back). What a tool changes in the
    process's logging (levels, file handlers) is undone after it."""
    logger = logging.getLogger(__name__)
    logger.info("$ %s", step.shell)
    if step.tool == "fairseq-train":
        logger.info("machine: %s", this_machine().describe())
    if record is not None:
        with open(record, "a", encoding="utf-8") as commands:
            commands.write(step.shell + "\n")
    try:
        with restored_logging():
            call_tool(step.tool, step.argv)
    except SystemExit as stop:
        raise RuntimeError(f"{step.tool} exited with {stop.code}: {step.shell}") from None


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
