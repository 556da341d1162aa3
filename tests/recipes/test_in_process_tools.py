"""Tools run one after another in one process (``devtools.in_process_tools``, the suite's and the
recipes' way of saving interpreter start-ups) leave nothing running behind them and pass their failures on."""
import multiprocessing
import sys

import pytest

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool


def test_a_training_run_in_this_process_leaves_no_data_loader_worker(tiny_data, tmp_path):
    """fairseq-train keeps its loader's worker between epochs and stops at --max-update with it
    alive; left running, it would cost the garbage collector a five-second wait later on."""
    before = set(multiprocessing.active_children())
    call_tool("fairseq-train", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
        "--cpu", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1",
        "--num-workers", "1", "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--disable-validation",
        "--log-format", "none",
    ])
    assert set(multiprocessing.active_children()) <= before


def test_a_tool_that_fails_raises_and_leaves_sys_argv_as_it_was(tiny_data):
    """The suite and the recipes run the stock entry points here: a failure (argparse's exit status
    2) reaches the caller, and the next tool sees the caller's sys.argv, not the failed one's."""
    argv = list(sys.argv)
    with pytest.raises(SystemExit) as stop:
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--arch", "hmce", "--no-such-option"])
    assert stop.value.code == 2
    assert sys.argv == argv
