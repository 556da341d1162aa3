"""Operations per training step of the context models against the sentence-level Transformer.

Usage: ``python benchmarks/context_op_count.py [--size base] [--max-tokens 4096] [--results DIR]``

Why: on a GPU a training step of a Transformer-sized model costs about one kernel launch per
operation before it costs arithmetic, so a model that runs many more, smaller operations than
the Transformer trains far slower there than its multiply-adds say, while on the CPU (where
arithmetic dominates) the same model can be close. The operation count is that cost, measured
on the CPU: it depends on the model's code and the batch, not on the device.

Method: the documents of ``benchmarks/context_speed.py`` (~17-token lines) batched by
``--max-tokens`` as ``fairseq-train`` batches them (document windows for the context models),
and for each setting the first ``--batches`` training batches, each one forward + backward
(``task.train_step``), counted at torch's dispatcher (the operations that reach a device,
backward included, composite ones split into the ones they run): every operation that does not
only return a view of its input (a view launches no kernel), the matrix products among them,
and the operations that make the host wait for the device (``nonzero``, a tensor read as a
Python number, indexing with a boolean mask). hce/hmce are counted twice: with their CPU path
(``--train-length-chunks``, default 3: a batch of mixed lengths runs as up to 3 chunks of
similar lengths) and with the single pass that a batch on a GPU always runs.
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from torch.utils._python_dispatch import TorchDispatchMode

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from context_speed import SIZES, USER_DIR, build_data  # noqa: E402
from devtools.machine_facts import this_machine, utc_now  # noqa: E402

SETTINGS = [("transformer", 0, False), ("ctx_concat", 2, False), ("hce", 2, False), ("hce", 2, True),
            ("hmce", 2, False), ("hmce", 2, True)]
SYNCS = {"aten.nonzero.default", "aten._local_scalar_dense.default"}
LEGEND = ("Counted at torch's dispatcher, backward included: operations = those that do not only return a view "
          "(a view launches no kernel); host syncs = nonzero, a tensor read as a Python number, indexing with a "
          "boolean mask. On a GPU each operation is about one kernel launch. hce/hmce without 'single pass' run "
          "their CPU path: --train-length-chunks 3.")
PRODUCTS = {"aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.baddbmm.default"}


class OperationCount(TorchDispatchMode):
    """Counts the operations that reach the dispatcher: all that are not views, the matrix
    products, and those that synchronise the host with the device."""

    def __init__(self) -> None:
        super().__init__()
        self.operations = self.products = self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not any(result.alias_info is not None for result in func._schema.returns):
            self.operations += 1
        self.products += str(func) in PRODUCTS
        boolean_index = str(func) == "aten.index.Tensor" and any(
            index is not None and index.dtype == torch.bool for index in args[1])
        self.syncs += str(func) in SYNCS or boolean_index
        return func(*args, **(kwargs or {}))


@dataclass
class Row:
    setting: str
    target_tokens: float
    operations: float
    matrix_products: float
    host_syncs: float


def parse_cli(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="base", help="model size (context_speed.py's)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="fairseq's --max-tokens of every batch")
    parser.add_argument("--batches", type=int, default=3, help="training batches counted per setting (mean reported)")
    parser.add_argument("--train-sentences", type=int, default=3000, help="generated training sentences")
    parser.add_argument("--results", help="directory for context_op_count.{md,json}")
    return parser.parse_args(argv)


def count_setting(data_bin: Path, arch: str, context_size: int, single_pass: bool, args: argparse.Namespace) -> Row:
    parser = options.get_training_parser()
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, input_args=[
        str(data_bin), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", str(context_size),
        "--arch", arch, "--cpu", "--seed", "1", *SIZES[args.size].fairseq_args(), "--criterion",
        "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens)]))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    if single_pass:
        model.use_single_pass()
    batches = task.get_batch_iterator(task.dataset("train"), max_tokens=args.max_tokens, seed=1).next_epoch_itr(
        shuffle=True)
    model.train()
    counts: List[OperationCount] = []
    tokens = []
    for _, sample in zip(range(args.batches), batches):
        with OperationCount() as count:
            loss, _, _ = criterion(model, sample)
            loss.backward()
        model.zero_grad()
        counts.append(count)
        tokens.append(sample["ntokens"])
    name = f"{arch} --context-size {context_size}" + (" (single pass, as on a GPU)" if single_pass else "")
    return Row(name, statistics.mean(tokens), *(statistics.mean(getattr(c, key) for c in counts)
                                                for key in ("operations", "products", "syncs")))


def table(rows: Sequence[Row]) -> List[str]:
    baseline = rows[0]
    lines = ["| setting | target tokens | operations | / transformer's | matrix products | host syncs |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.setting} | {row.target_tokens:.0f} | {row.operations:.0f} | "
                     f"{row.operations / baseline.operations:.2f} | {row.matrix_products:.0f} | {row.host_syncs:.0f} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    torch.manual_seed(1)
    start, load = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="context_op_count_") as root:
        build_data(Path(root), seed=1, train_sentences=args.train_sentences, test_sentences=30, per_line=3)
        rows = [count_setting(Path(root) / "data-bin", *setting, args) for setting in SETTINGS]
    header = {
        "date": utc_now(), "machine": this_machine().describe(), "load average before": f"{load:.2f}",
        "model size": f"{args.size} ({' '.join(SIZES[args.size].fairseq_args())})",
        "batches": f"--max-tokens {args.max_tokens}, the first {args.batches} training batches of each setting (mean)",
        "wall time": f"{time.time() - start:.0f} s",
        "command": " ".join(shlex.quote(a) for a in ["python", "benchmarks/context_op_count.py",
                                                      *(sys.argv[1:] if argv is None else argv)]),
    }
    lines = ["# Operations per training step (forward + backward) of the context models", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    lines += ["", *table(rows), "", LEGEND]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.results:
        out = Path(args.results)
        out.mkdir(parents=True, exist_ok=True)
        (out / "context_op_count.md").write_text(text, encoding="utf-8")
        (out / "context_op_count.json").write_text(
            json.dumps({**header, "rows": [asdict(r) for r in rows]}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
