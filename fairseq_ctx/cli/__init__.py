"""Console scripts (see setup.py).

A tool whose standard output is closed early by its reader (``fairseq-ctx-translate-doc ... |
head -1``) ends quietly, as Unix tools do: Python would print a ``BrokenPipeError`` traceback
and, when it flushes standard output at exit, a second "Exception ignored" error. Importing any
tool installs the handling: an uncaught ``BrokenPipeError`` and the final flush send what is left
to ``/dev/null`` instead (exit status 1 for the interrupted write, as for any uncaught error)."""
import atexit
import os
import sys


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that nothing more is written to the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()


def _quiet_broken_pipe(previous):
    def excepthook(kind, value, traceback):
        if issubclass(kind, BrokenPipeError):
            _discard_stdout()
            return
        previous(kind, value, traceback)

    return excepthook


sys.excepthook = _quiet_broken_pipe(sys.excepthook)
atexit.register(_flush_quietly)
