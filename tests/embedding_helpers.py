"""Builders shared by the multilingual-embedding tests (tiny models on the generated corpus)."""
import os
from pathlib import Path
from typing import Optional, Sequence

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from tests.helpers import EMBEDDING_PAIRS, USER_DIR
from devtools.arch_matrix import EMBEDDING_SIZES, TINY_TRANSFORMER  # noqa: F401  (used by the tests)

ARCHS = EMBEDDING_SIZES


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """These models are tiny: one intra-op thread is faster, and on a shared machine a thread
    pool spinning against other processes made single updates take seconds. Applies to the
    tools run in subprocesses too (OMP_NUM_THREADS); both are restored afterwards."""
    threads, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    torch.set_num_threads(threads)
    if env is None:
        del os.environ["OMP_NUM_THREADS"]
    else:
        os.environ["OMP_NUM_THREADS"] = env


def build_embedding_model(data: Path, arch: str, extra: Sequence[str] = (), size: Optional[Sequence[str]] = None):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data), "--user-dir", USER_DIR, "--task", "multilingual_embedding", "--lang-pairs", EMBEDDING_PAIRS,
        "--arch", arch, "--criterion", "distance_constraint", "--label-smoothing", "0.1", "--cpu", "--seed", "1",
        *(ARCHS[arch] if size is None else size), *extra,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    return task, model, criterion


def valid_batch(task, max_tokens: int = 300):
    if "valid" not in task.datasets:
        task.load_dataset("valid")
    dataset = task.datasets["valid"]
    first = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=max_tokens)[0]
    return dataset.collater([dataset[i] for i in first])
