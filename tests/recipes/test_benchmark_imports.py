"""Importing a benchmark changes no logging or warnings setup: the tests import the benchmarks'
measuring functions, and a logger silenced at import hid fairseq's log lines from every later
test in the same worker (benchmarks.quiet is called in a benchmark's ``main`` only)."""
import subprocess
import sys
from pathlib import Path

import benchmarks

CHECK = """
import importlib, logging, sys, warnings
import torch, fairseq, fairseq.tasks, fairseq_ctx
def state():
    levels = {name: logging.getLogger(name).level for name in sorted(logging.root.manager.loggerDict)}
    return levels, logging.root.manager.disable, logging.root.level, list(warnings.filters)
before = state()
for name in sys.argv[1:]:
    importlib.import_module(name)
after = state()
changed = sorted(n for n, level in after[0].items() if before[0].get(n, logging.NOTSET) != level)
print("levels", changed)
print("disable", before[1], after[1])
print("root", before[2], after[2])
print("filters", len(before[3]), len(after[3]))
"""


def test_importing_every_benchmark_leaves_logging_and_warnings_as_they_were():
    names = sorted(f"benchmarks.{path.stem}" for path in Path(benchmarks.__file__).parent.glob("*.py")
                   if path.stem != "__init__")
    assert "benchmarks.context_speed" in names
    printed = subprocess.run([sys.executable, "-c", CHECK, *names], capture_output=True, text=True, check=True).stdout
    lines = dict(line.split(" ", 1) for line in printed.splitlines())
    assert lines["levels"] == "[]"
    disable_before, disable_after = lines["disable"].split()
    assert disable_before == disable_after
    root_before, root_after = lines["root"].split()
    assert root_before == root_after
    filters_before, filters_after = lines["filters"].split()
    assert filters_before == filters_after
