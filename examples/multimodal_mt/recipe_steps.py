"""The commands of the Multi30k recipes, run inside the recipe's Python process (one interpreter,
no start-up per command), each recorded as the shell line a reader can run instead; their logs
captured to a file; and files written whole or not at all, so an interrupted run resumes."""
import contextlib
import io
import logging
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional


@dataclass
class Step:
    """A fairseq / fairseq-ctx command run in this process; ``shell`` is its command line for the record."""

    tool: str
    argv: List[str]
    shell: str = field(init=False)

    def __post_init__(self) -> None:
        self.shell = " ".join(shlex.quote(part) for part in [self.tool, *self.argv])


def run(step: Step) -> Optional[str]:
    """Run a fairseq / fairseq-ctx tool in this process; returns what a tool that reports on
    stdout (fairseq-ctx-analyze-heads) printed."""
    from fairseq import options

    logging.getLogger(__name__).info("$ %s", step.shell)
    if step.tool == "fairseq-preprocess":
        from fairseq_cli import preprocess

        # fairseq-preprocess adds a log file handler in its --destdir at every call; keep it to this call
        before = list(preprocess.logger.handlers)
        try:
            preprocess.main(options.get_preprocessing_parser().parse_args(step.argv))
        finally:
            for handler in [h for h in preprocess.logger.handlers if h not in before]:
                preprocess.logger.removeHandler(handler)
                handler.close()
    elif step.tool == "fairseq-train":
        from fairseq import checkpoint_utils
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf
        from fairseq.distributed import utils as distributed_utils
        from fairseq_cli import train

        # fairseq keeps the best validation score of a run on these functions; a new model starts afresh
        for function in (checkpoint_utils.save_checkpoint, train.should_stop_early):
            if hasattr(function, "best"):
                del function.best
        args = options.parse_args_and_arch(options.get_training_parser(), step.argv)
        distributed_utils.call_main(convert_namespace_to_omegaconf(args), train.main)
    elif step.tool == "fairseq-generate":
        from fairseq_cli import generate

        generate.main(options.parse_args_and_arch(options.get_generation_parser(), step.argv))
    elif step.tool == "fairseq-ctx-analyze-heads":
        from fairseq_ctx.cli import analyze_heads
        from fairseq_ctx.cli.tool_logging import QUIET_LIBRARIES

        # the tool quiets fairseq's loggers for itself; the trainings after it in this process log as before
        levels = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
        try:
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                analyze_heads.main(step.argv)
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
        return printed.getvalue()
    else:
        raise ValueError(f"unknown tool {step.tool}")
    return None


@contextlib.contextmanager
def captured_log(path: Path):
    """Append every log record of the enclosed steps to ``path`` (a resumed training run keeps the
    validations logged before it stopped)."""
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
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
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
