"""Shared fixtures: generated corpora binarized with stock fairseq-preprocess, and helpers
that build tasks and models through fairseq's own command-line parsing."""
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from devtools.arch_matrix import EMBEDDING_PAIRS, TINY_MODEL  # noqa: F401  (used by the tests)
from devtools.in_process_tools import call_tool
import fairseq_ctx
from fairseq_ctx.core.mixed_precision import NATIVE_BFLOAT16_ENV
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes
from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes

USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))

# The models under test are tiny: a second intra-op thread buys little, and on a shared or
# busy machine two spinning OpenMP threads per process slow everything down many times over.
# One thread here and in every tool the tests start (they inherit the environment).
os.environ["OMP_NUM_THREADS"] = "1"
# Every precision decision (recipes' --precision auto, the --amp warning, float32 recurrences) takes
# the branch of a CPU without native bfloat16 products, whatever CPU runs the suite: that branch runs
# on every CPU, and the tests of the other branch force the probe themselves. Set it to 1 before
# `make test` on a CPU with AVX512-BF16 or AMX to run the whole suite in the other branch.
os.environ.setdefault(NATIVE_BFLOAT16_ENV, "0")
os.environ["MKL_NUM_THREADS"] = "1"
torch.set_num_threads(1)
BIN_DIR = Path(sys.executable).parent


def tool(name: str) -> str:
    return str(BIN_DIR / name)


def run_tool(args: Sequence[str], cwd=None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([tool(args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def make_data_bin(root: Path, sizes: CorpusSizes, seed: int = 1) -> Path:
    """Generated corpus → prepare-docs → fairseq-preprocess (joined dict) → docids copied."""
    return binarize_context_corpus(root, sizes, seed)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """About 300 training sentences in 40 documents."""
    return make_data_bin(tmp_path_factory.mktemp("tiny"), CorpusSizes(train=40, valid=6, test=6))


def parse_cfg(data_dir: Path, arch: str, extra: Sequence[str] = ()):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        input_args=[str(data_dir), "--user-dir", USER_DIR, "--task", "context_translation",
                    "--arch", arch, "--cpu", "--seed", "1", *TINY_MODEL, *extra],
    )
    return convert_namespace_to_omegaconf(args)


def build(data_dir: Path, arch: str = "hmce", extra: Sequence[str] = ()):
    cfg = parse_cfg(data_dir, arch, extra)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    return task, model, cfg


def batch_of(task, split: str, indices: List[int]):
    dataset = task.datasets[split]
    return dataset.collater([dataset[i] for i in indices])


@pytest.fixture(scope="session")
def multilingual_data(tmp_path_factory) -> Path:
    """Three generated languages (xa → pivots pa, pb; pa ↔ pb), about 400 training sentences."""
    from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual
    from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus

    root = tmp_path_factory.mktemp("multilingual")
    write_multilingual_corpus(str(root / "raw"), MultilingualSizes(100, 10, 20), seed=3)
    return binarize_multilingual(root / "raw", root / "data-bin", EMBEDDING_PAIRS.split(","), ["pa", "pb", "xa"])


def context_baseline_archs() -> List[str]:
    """Every registered context_translation arch but hce/hmce: the baselines (ctx_concat, dat, dct,
    han, and one added later without editing this file)."""
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    from fairseq_ctx.context.models.context_transformer import ContextTransformerModel
    from fairseq_ctx.context.models.hmce import HierarchicalContextTransformer

    return sorted(arch for arch, cls in ARCH_MODEL_REGISTRY.items() if arch not in MODEL_REGISTRY
                  and issubclass(cls, ContextTransformerModel) and not issubclass(cls, HierarchicalContextTransformer))


BASELINE_ARCHS = context_baseline_archs()


@contextlib.contextmanager
def shared_by_the_workers(tmp_path_factory, name: str) -> Iterator[Tuple[Path, bool]]:
    """A directory that the xdist workers of this run share (one test process: its own), and whether
    it is still empty: the first worker to ask fills it (inside the ``with``) while the others wait
    for it, so that a session fixture trains once per run rather than once per worker."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' base directories are siblings
    directory, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fill = not done.exists()
            if fill:
                shutil.rmtree(directory, ignore_errors=True)  # left by a worker that failed to fill it
                directory.mkdir()
            yield directory, fill
            done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def trained_baselines(tiny_data, tmp_path_factory):
    """Each context baseline (and a --context-size 0 transformer) trained 30 updates with stock
    fairseq-train and decoded with stock fairseq-generate, once per run (every worker generates the
    same tiny_data); {arch: (checkpoint_dir, generate text)}."""
    archs = [*BASELINE_ARCHS, "transformer"]
    with shared_by_the_workers(tmp_path_factory, "baselines") as (work, fill):
        if fill:
            train_baselines(tiny_data, work, archs)
    return {arch: (work / arch, (work / f"gen-{arch}" / "generate-test.txt").read_text()) for arch in archs}


def train_baselines(tiny_data: Path, work: Path, archs: Sequence[str]) -> None:
    for arch in archs:
        context = ["--context-size", "0" if arch == "transformer" else "2"]
        save_dir, results = work / arch, work / f"gen-{arch}"
        common = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", *context, "--cpu"]
        call_tool("fairseq-train", [
            *common, "--arch", arch, *TINY_MODEL, "--optimizer", "adam", "--lr", "5e-3", "--max-tokens", "2000",
            "--max-update", "30", "--criterion", "label_smoothed_cross_entropy", "--seed", "1", "--dropout", "0.0",
            "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--log-format", "none",
            "--disable-validation",
        ])
        call_tool("fairseq-generate", [
            *common, "--path", str(save_dir / "checkpoint_last.pt"), "--gen-subset", "test", "--beam", "2",
            "--batch-size", "16", "--required-batch-size-multiple", "1", "--results-path", str(results),
        ])


def make_multimodal_data_bin(root: Path, train: int = 240, seed: int = 1) -> Path:
    """Generated multimodal corpus → fairseq-preprocess (en-de joined dict; fr with its own dict)
    → img features and keys copied next to the binaries."""
    return binarize_multimodal_corpus(
        root, MultimodalCorpusSizes(train=train, valid=16, test=16, regions=3, feature_dim=8), seed)


@pytest.fixture(scope="session")
def multimodal_data(tmp_path_factory) -> Path:
    """About 240 training sentences with (n, 3, 8) image features and a French second source."""
    return make_multimodal_data_bin(tmp_path_factory.mktemp("multimodal"))


def build_multimodal(data_dir: Path, arch: str = "hierarchical_attention_decoder", extra: Sequence[str] = (),
                     task_args: Sequence[str] = ("--feature-inputs", "img"), model_args: Sequence[str] = TINY_MODEL):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        input_args=[str(data_dir), "--user-dir", USER_DIR, "--task", "multimodal_translation", "--arch", arch,
                    "--source-lang", "en", "--target-lang", "de", "--cpu", "--seed", "1", *model_args, *task_args, *extra],
    )
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    return task, model, cfg


@pytest.fixture(autouse=True)
def restore_library_log_levels():
    """A tool run in-process sets the libraries' loggers to WARNING (cli.tool_logging); a later
    test reading fairseq's INFO lines with caplog needs them as they were."""
    from devtools.in_process_tools import restored_logging

    with restored_logging():
        yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Order the modules as ``--dist loadfile`` should hand them out (``make test`` turns xdist's own
    reordering off with ``--no-loadscope-reorder``): the modules marked ``heavy`` first, then the
    others with the most tests first (xdist's default order). A long module handed out last runs
    alone on one worker at the end while the other worker idles; started first, the short modules
    fill in around it."""
    tests_per_module = Counter(item.path for item in items)
    first_index = {}
    for index, item in enumerate(items):
        first_index.setdefault(item.path, index)

    def rank(item: pytest.Item):
        return item.get_closest_marker("heavy") is None, -tests_per_module[item.path], first_index[item.path]

    items.sort(key=rank)
