"""The production-training matrix: every arch that fairseq_ctx registers, the task it belongs to,
a tiny data fixture and tiny model sizes for that task, and helpers that run stock fairseq-train
and read its per-update JSON log. New archs are picked up from fairseq's ARCH_MODEL_REGISTRY;
archs of a task without a fixture here are skipped with a reason naming what to add."""
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY

import fairseq_ctx  # noqa: F401  (registers the archs)
from conftest import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR, tool
from embedding_helpers import TINY_TRANSFORMER, ARCHS as EMBEDDING_SIZES
from fairseq_ctx.context.baselines.base import ContextTransformerModel
from fairseq_ctx.multisource.transformer import MultiSourceTransformer
from fairseq_ctx.embedding.laser_bilstm import LaserModel
from fairseq_ctx.multisource.rnn import MultiSourceRNN
from fairseq_ctx.embedding.tmde import TransformerMDE

# Model class → task. A model family added later either subclasses one of these or is listed here.
MODEL_TASKS = {
    ContextTransformerModel: "context_translation",
    TransformerMDE: "multilingual_embedding",
    LaserModel: "multilingual_embedding",
    MultiSourceTransformer: "multimodal_translation",
    MultiSourceRNN: "multimodal_translation",
}
TINY_RNN = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
            "--decoder-hidden-size", "24", "--attention-dim", "20"]


@dataclass
class TaskFixture:
    """How to train a task on tiny data: the pytest fixture with its data-bin and the options."""
    data_fixture: str
    task_args: List[str]
    sizes: Dict[str, List[str]]
    default_size: List[str]

    def model_args(self, arch: str) -> List[str]:
        return list(self.sizes.get(arch, self.default_size))


TASK_FIXTURES = {
    "context_translation": TaskFixture(
        "tiny_data",
        ["--task", "context_translation", "--context-size", "2", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1"],
        {}, TINY_MODEL,
    ),
    "multilingual_embedding": TaskFixture(
        "multilingual_data",
        ["--task", "multilingual_embedding", "--lang-pairs", EMBEDDING_PAIRS, "--criterion", "distance_constraint",
         "--label-smoothing", "0.1"],
        EMBEDDING_SIZES, TINY_TRANSFORMER,
    ),
    "multimodal_translation": TaskFixture(
        "multimodal_data",
        ["--task", "multimodal_translation", "--feature-inputs", "img", "--source-lang", "en", "--target-lang", "de",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"],
        {"multisource_rnn": TINY_RNN}, TINY_MODEL,
    ),
}


def task_of(arch: str) -> Optional[str]:
    model_cls = ARCH_MODEL_REGISTRY[arch]
    declared = getattr(model_cls, "task_name", None)
    if declared:
        return declared
    for base, task in MODEL_TASKS.items():
        if issubclass(model_cls, base):
            return task
    return None


def plugin_archs() -> List[str]:
    """Every arch registered by fairseq_ctx (its model class lives in the package)."""
    return sorted(arch for arch, cls in ARCH_MODEL_REGISTRY.items() if cls.__module__.startswith("fairseq_ctx."))


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
                f"arch {arch} ({cls.__module__}.{cls.__name__}) belongs to no known task: add its model class "
                "to MODEL_TASKS (or a task_name attribute) in tests/production_matrix.py")))
        elif task not in TASK_FIXTURES:
            marks.append(pytest.mark.skip(reason=(
                f"arch {arch} belongs to task {task}, which has no tiny data fixture: add one to "
                "TASK_FIXTURES in tests/production_matrix.py")))
        params.append(pytest.param(task, arch, marks=marks, id=f"{task}-{arch}"))
    return params


def train_args(data: Path, task: str, arch: str, save_dir: Path, max_update: int, extra: Sequence[str] = ()) -> List[str]:
    fixture = TASK_FIXTURES[task]
    return [
        str(data), "--user-dir", USER_DIR, *fixture.task_args, "--arch", arch, *fixture.model_args(arch),
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "300", "--max-update", str(max_update),
        "--seed", "1", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
        "--save-dir", str(save_dir), "--log-format", "json", "--log-interval", "1", *extra,
    ]


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


def per_update(log: str, key: str = "loss") -> Dict[int, float]:
    """{num_updates: value} from the train_inner lines of a ``--log-format json --log-interval 1`` log."""
    values = {}
    for line in log.splitlines():
        start_index = line.find('{"epoch"')
        if start_index < 0:
            continue
        record = json.loads(line[start_index:])
        if "train_num_updates" in record or key not in record or "num_updates" not in record:
            continue
        values[int(record["num_updates"])] = float(record[key])
    return values


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
