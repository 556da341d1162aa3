"""The production-training matrix as pytest parameters: every arch that fairseq_ctx registers with
its task, tiny data fixture and sizes (devtools.arch_matrix), and helpers that run stock
fairseq-train. Archs of a task without a fixture are skipped with a reason naming what to add."""
import socket
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY

from tests.helpers import tool
from devtools.arch_matrix import (  # noqa: F401  (the matrix itself, used by the tests)
    TASK_FIXTURES, TINY_RNN, per_update, plugin_archs, task_of, train_args,
)


def arch_params(default_archs: Sequence[str], slow_marker) -> list:
    """pytest params (task, arch) for every plugin arch: the default ones run always, the others
    carry ``slow_marker``; archs whose task has no fixture are skipped with the reason."""
    params = []
    for arch in plugin_archs():
        task = task_of(arch)
        marks = [] if arch in default_archs else [slow_marker]
        if task is None:
            cls = ARCH_MODEL_REGISTRY[arch]
            marks.append(pytest.mark.skip(reason=(
                f"arch {arch} ({cls.__module__}.{cls.__name__}) belongs to no known task: give its model class "
                "a task_name attribute (the task it is trained with)")))
        elif task not in TASK_FIXTURES:
            marks.append(pytest.mark.skip(reason=(
                f"arch {arch} belongs to task {task}, which has no tiny data fixture: add one to "
                "TASK_FIXTURES in devtools/arch_matrix.py")))
        params.append(pytest.param(task, arch, marks=marks, id=f"{task}-{arch}"))
    return params


def start(command: Sequence[str]) -> subprocess.Popen:
    return subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, timeout: float = 300) -> str:
    output, _ = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise AssertionError(f"{' '.join(process.args)} failed:\n{output[-4000:]}")
    return output


def fairseq_train(args: Sequence[str]) -> List[str]:
    return [tool("fairseq-train"), *args]


def rank_runner(args: Sequence[str]) -> List[str]:
    return [sys.executable, str(Path(__file__).with_name("production_rank_runner.py")), *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
