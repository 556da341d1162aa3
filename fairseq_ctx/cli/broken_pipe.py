"""A tool whose standard output is closed early by its reader (``fairseq-ctx-translate-doc ... |
head -1``) ends quietly, as Unix tools do: Python would print a ``BrokenPipeError`` traceback
and, when it flushes standard output at exit, a second "Exception ignored" error. A tool's
``main`` installs the handling (through :func:`~fairseq_ctx.cli.tool_args.tool_parser`, which every
tool calls first; importing a tool changes nothing): an uncaught ``BrokenPipeError`` and the final
flush send what is left to ``/dev/null`` instead (exit status 1 for the interrupted write, as for
any uncaught error)."""
import atexit
import os
import sys


def discard_stdout() -> None:
    """Point standard output at /dev/null, so that nothing more is written to the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()


def _quiet_excepthook(previous):
    def excepthook(kind, value, traceback):
        if issubclass(kind, BrokenPipeError):
            discard_stdout()
            return
        previous(kind, value, traceback)

    excepthook.quiet_broken_pipe = True
    return excepthook


def end_quietly_on_a_closed_pipe() -> None:
    """Install the handling for the running tool (once per process)."""
    if getattr(sys.excepthook, "quiet_broken_pipe", False):
        return
    sys.excepthook = _quiet_excepthook(sys.excepthook)
    atexit.register(_flush_quietly)
