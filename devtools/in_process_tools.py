"""Stock fairseq and fairseq-ctx console scripts run one after another in this process (no
interpreter start-up per run): :func:`call_tool` runs one with the arguments of its command line;
:func:`restored_logging` undoes what a tool changes in the logging setup (the recipes, the test
suite); :func:`run_tool` also writes each tool's log lines to a file of its own, captures what it
prints and turns its failure into :class:`ToolFailed` (the GPU check)."""
import contextlib
import gc
import io
import logging
import multiprocessing
import sys
import warnings
from pathlib import Path
from typing import Iterator, Sequence

import torch

from fairseq_ctx.cli.tool_logging import QUIET_LIBRARIES

# the loggers fairseq adds file handlers to: --log-file (train), preprocess.log in --destdir (preprocess)
FAIRSEQ_FILE_LOGGERS = ("fairseq_cli.train", "fairseq.logging.progress_bar", "fairseq_cli.preprocess")
LOGGED_LIBRARIES = ("fairseq", "fairseq_cli", "fairseq_ctx")  # at INFO into each tool's log file
# console script -> (module, function, whether it reads sys.argv instead of an argv parameter)
TOOLS = {
    "fairseq-preprocess": ("fairseq_cli.preprocess", "cli_main", True),
    "fairseq-train": ("fairseq_cli.train", "cli_main", True),
    "fairseq-generate": ("fairseq_cli.generate", "cli_main", True),
    "fairseq-interactive": ("fairseq_cli.interactive", "cli_main", True),
    "fairseq-validate": ("fairseq_cli.validate", "cli_main", True),
    "fairseq-ctx-prepare-docs": ("fairseq_ctx.cli.prepare_docs", "main", False),
    "fairseq-ctx-translate-doc": ("fairseq_ctx.cli.translate_doc", "main", False),
    "fairseq-ctx-contrastive": ("fairseq_ctx.cli.contrastive", "main", False),
    "fairseq-ctx-cxmi": ("fairseq_ctx.cli.cxmi", "main", False),
    "fairseq-ctx-generative": ("fairseq_ctx.cli.generative", "main", False),
    "fairseq-ctx-supporting-attention": ("fairseq_ctx.cli.supporting_attention", "main", False),
    "fairseq-ctx-score": ("fairseq_ctx.cli.score", "main", False),
    "fairseq-ctx-analyze-heads": ("fairseq_ctx.cli.analyze_heads", "main", False),
}


@contextlib.contextmanager
def restored_logging(loggers: Sequence[str] = QUIET_LIBRARIES) -> Iterator[None]:
    """Run tools one after another in one process: on exit, the levels of ``loggers`` are as on
    entry (each of our tools quietens the libraries: fairseq_ctx.cli.tool_logging) and the file
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


class ToolFailed(RuntimeError):
    """A tool run in this process stopped with an error; the message says where its log is."""


@contextlib.contextmanager
def tool_session(name: str, log: Path) -> Iterator[io.StringIO]:
    """Run the enclosed tool with its log lines (INFO) in ``log`` and what it prints captured; turn
    its failure into :class:`ToolFailed`; leave the logging setup as it was and free the GPU memory
    the tool left."""
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    log.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    printed = io.StringIO()
    try:
        with restored_logging((*QUIET_LIBRARIES, *LOGGED_LIBRARIES)), contextlib.redirect_stdout(printed), warnings.catch_warnings():
            for library in LOGGED_LIBRARIES:
                logging.getLogger(library).setLevel(logging.INFO)
            warnings.simplefilter("ignore")
            yield printed
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise ToolFailed(f"{name} exited with {stop.code} (log: {log})") from None
    except Exception as error:
        logging.getLogger(__name__).exception(f"{name} failed")
        last = (str(error).strip().splitlines() or [""])[-1]
        raise ToolFailed(f"{name}: {type(error).__name__}: {last} (log: {log})") from error
    finally:
        handler.close()
        root.handlers = root_handlers
        root.setLevel(root_level)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def forget_best_validation() -> None:
    """fairseq keeps a run's best validation score on two functions; each training starts afresh
    (a resumed one reads its own from its checkpoint)."""
    from fairseq import checkpoint_utils
    from fairseq_cli import train

    for function in (checkpoint_utils.save_checkpoint, train.should_stop_early):
        if hasattr(function, "best"):
            del function.best


def end_data_loader_workers() -> None:
    """End every data-loader worker process alive in this process: called after each tool run here,
    when no loader of the caller's is in use (it would be ended too).

    fairseq keeps its data loaders' workers alive between epochs (``persistent_workers``), so a
    training that stops at ``--max-update`` leaves one per loader. In a process of its own they end
    at exit; here the loader becomes cyclic garbage, and when the garbage collector frees it, its
    queues are closed before torch asks the worker to stop: torch then waits five seconds for the
    worker and kills it, inside whatever code happened to trigger the collection. Stopped now,
    while their queues are open, the workers end at once."""
    if not multiprocessing.active_children():
        return
    from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

    for loader in [obj for obj in gc.get_objects() if isinstance(obj, _MultiProcessingDataLoaderIter)]:
        loader._shutdown_workers()


def call_tool(tool: str, args: Sequence[str]) -> None:
    """Run the console script ``tool`` of :data:`TOOLS` with ``args`` in this process, ``sys.argv`` left
    as it was. A training starts without the best validation score of the run before; a tool that
    ends with ``SystemExit`` 0 (e.g. a finished training run again) has succeeded; the data-loader
    workers it leaves are ended (:func:`end_data_loader_workers`). The plugin is registered first:
    ``--user-dir`` imports nothing in a process that imported the package before fairseq."""
    import fairseq_ctx

    fairseq_ctx.register()
    module, function, via_argv = TOOLS[tool]
    entry = getattr(__import__(module, fromlist=[function]), function)
    if tool == "fairseq-train":
        forget_best_validation()
    saved_argv = sys.argv
    try:
        if via_argv:
            sys.argv = [tool, *args]
            entry()
        else:
            entry(list(args))
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    finally:
        sys.argv = saved_argv
        end_data_loader_workers()


def run_tool(tool: str, args: Sequence[str], log: Path) -> str:
    """:func:`call_tool` inside a :func:`tool_session` writing to ``log``; returns what the tool printed."""
    with tool_session(tool, log) as printed:
        call_tool(tool, args)
    return printed.getvalue()


@contextlib.contextmanager
def quiet_console() -> Iterator[None]:
    """Only warnings reach the console (fairseq and the corpus generators log at INFO); each tool's
    INFO lines go to its log file (:func:`tool_session`)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(level)
