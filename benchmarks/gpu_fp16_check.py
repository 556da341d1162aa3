"""fairseq-train --fp16 for 50 updates for every registered fairseq_ctx arch, on the generated
corpora of the test suite, appending one row per arch to docs/gpu-checks.md.

Needs a CUDA GPU (fairseq's --fp16 does not run on the CPU). The archs, their tasks, the tiny
model sizes and the task options are those of the production-training matrix
(devtools/arch_matrix.py), so an arch registered later is checked without editing this file.

    python benchmarks/gpu_fp16_check.py [--updates 50] [--archs hmce,tmde] [--work DIR] [--doc docs/gpu-checks.md]
"""
import argparse
import datetime
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import torch

REPOSITORY = str(Path(__file__).resolve().parents[1])  # holds devtools, the helpers of the scripts and tests
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

from devtools.arch_matrix import EMBEDDING_PAIRS, TASK_FIXTURES, per_update, plugin_archs, task_of, train_args  # noqa: E402
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus  # noqa: E402
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes  # noqa: E402
from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual  # noqa: E402
from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus  # noqa: E402
from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus  # noqa: E402
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def generated_corpora(work: Path) -> Dict[str, Path]:
    """The data-bin of each task fixture, generated and binarized as the tests do."""
    raw = work / "multilingual" / "raw"
    write_multilingual_corpus(str(raw), MultilingualSizes(100, 10, 20), seed=3)
    return {
        "tiny_data": binarize_context_corpus(work / "context", CorpusSizes(train=40, valid=6, test=6)),
        "multilingual_data": binarize_multilingual(raw, work / "multilingual" / "data-bin", EMBEDDING_PAIRS.split(","),
                                                   ["pa", "pb", "xa"]),
        "multimodal_data": binarize_multimodal_corpus(
            work / "multimodal", MultimodalCorpusSizes(train=240, valid=16, test=16, regions=3, feature_dim=8)),
    }


def fp16_command(data: Path, task: str, arch: str, save_dir: Path, updates: int) -> List[str]:
    args = [a for a in train_args(data, task, arch, save_dir, updates) if a != "--cpu"]
    return [str(Path(sys.executable).parent / "fairseq-train"), *args, "--fp16"]


def append_row(doc: Path, gpu: str, arch: str, command: List[str], result: str) -> None:
    shown = " ".join(Path(part).name if part.startswith("/") else part for part in command)
    with doc.open("a") as handle:
        handle.write(f"| {datetime.date.today().isoformat()} | {gpu} | {arch} | `{shown}` | {result} |\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=50, help="updates per arch")
    parser.add_argument("--archs", default="", help="comma-separated archs (default: every registered one)")
    parser.add_argument("--work", help="directory for corpora and checkpoints (default: a temporary one)")
    parser.add_argument("--doc", default=str(ROOT / "docs" / "gpu-checks.md"), help="file the rows are appended to")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_fp16_check: no CUDA device; fairseq-train --fp16 needs a GPU (nothing was appended)")
    gpu = torch.cuda.get_device_name(0)
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_fp16_check_"))
    corpora = generated_corpora(work)
    archs = [a for a in args.archs.split(",") if a] or plugin_archs()
    failures = 0
    for arch in archs:
        task = task_of(arch)
        if task not in TASK_FIXTURES:
            print(f"{arch}: task {task} has no fixture in devtools/arch_matrix.py; skipped")
            continue
        command = fp16_command(corpora[TASK_FIXTURES[task].data_fixture], task, arch, work / "checkpoints" / arch,
                               args.updates)
        process = subprocess.run(command, capture_output=True, text=True)
        losses = per_update(process.stdout + process.stderr)
        final = losses.get(args.updates)
        if process.returncode == 0 and final is not None and math.isfinite(final):
            result = f"loss {final:.3f} after {args.updates} updates (update 1: {losses[min(losses)]:.3f})"
        else:
            failures += 1
            tail = (process.stderr or process.stdout).strip().splitlines()[-1:] or ["no output"]
            result = f"FAILED (exit {process.returncode}, last loss {final}): {tail[0][:200]}"
        print(f"{arch}: {result}")
        append_row(Path(args.doc), gpu, arch, command, result)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
