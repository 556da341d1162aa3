"""What the tests share besides their fixtures (tests/conftest.py): the plugin's user dir and the
tools' paths, generated corpora binarized with stock fairseq-preprocess, and tasks and models built
through fairseq's own command-line parsing. Imported as ``from tests.helpers import ...``."""
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from devtools.arch_matrix import EMBEDDING_PAIRS, TINY_MODEL  # noqa: F401  (used by the tests)
from devtools.in_process_tools import call_tool
from devtools.recipe_runs import repository_on_path
import fairseq_ctx
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes
from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes

fairseq_ctx.register()
USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
BIN_DIR = Path(sys.executable).parent


def tool(name: str) -> str:
    return str(BIN_DIR / name)


def run_module(module: str, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGV`` for a recipe or benchmark of the repository, from any directory."""
    return subprocess.run([sys.executable, "-m", module, *argv], env=repository_on_path(), **kwargs)


def run_tool(args: Sequence[str], cwd=None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([tool(args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def make_data_bin(root: Path, sizes: CorpusSizes, seed: int = 1) -> Path:
    """Generated corpus → prepare-docs → fairseq-preprocess (joined dict) → docids copied."""
    return binarize_context_corpus(root, sizes, seed)


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
