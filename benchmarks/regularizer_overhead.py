"""Per-update cost of each CKA-toolkit training term against the same model with the term off,
measured in one run (Yun 2022 ch. 4–5).

Usage: ``python -m benchmarks.regularizer_overhead [--clock cpu] [--threads 1] [--quick] [--json PATH]``

Method: fairseq's stock ``transformer`` (and ``hce`` for the CKA alignment term) built through
fairseq's parser; each term's criterion is compared with plain ``label_smoothed_cross_entropy`` on
the same model (the no-regularizer baseline; ``cka_alignment`` with λ = 0 would still compute
CKA), on a generated context corpus; a timed update = criterion forward + backward + Adam step on pre-collated batches, the same batches for every setting.
Settings are interleaved round-robin (off, term, off, term, ...) so that machine load hits all
alike; reported is the median seconds per update and the ratio term/off.
On a shared, loaded machine use ``--clock cpu --threads 1``: ``time.process_time`` counts only the
CPU time of this process (its single compute thread), so waiting for a core does not count.

Targets: CKA alignment <= 1.05, HSIC <= 1.10, orthogonality <= 1.10 (drophead is reported too).
The thesis-like size scaled down to CPU: 256 dims, 4 heads, 3+3 layers, 32 sentences per batch.
"""
import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import fairseq_ctx
from benchmarks.quiet import quiet_libraries
fairseq_ctx.register()
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes

USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
MODEL = ["--encoder-embed-dim", "256", "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024",
         "--decoder-ffn-embed-dim", "1024", "--encoder-layers", "3", "--decoder-layers", "3",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings"]
BASELINE = ["--criterion", "label_smoothed_cross_entropy"]
COMPARISONS = {
    # term: (arch, criterion args with the term on, target ratio); "off" is BASELINE on the same arch
    "cka_alignment": ("hce", ["--criterion", "cka_alignment", "--cka-lambda", "0.1"], 1.05),
    "hsic": ("transformer", ["--criterion", "head_diversity", "--hsic-lambda", "1e-7"], 1.10),
    "ortho": ("transformer", ["--criterion", "head_diversity", "--ortho-lambda", "1.0"], 1.10),
    "drophead": ("transformer", ["--criterion", "head_diversity", "--drophead", "0.1"], None),
}


def build(data_bin: Path, arch: str, extra):
    context = ["--context-size", "2"] if arch != "transformer" else ["--context-size", "0"]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data_bin), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", arch, "--cpu",
        "--seed", "1", "--label-smoothing", "0.1", "--dropout", "0.1", *context, *MODEL, *extra])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    return task, model, criterion, optimizer


def batches(task, batch_size: int, count: int):
    dataset = task.datasets["train"]
    return [dataset.collater([dataset[i] for i in range(k * batch_size, (k + 1) * batch_size)]) for k in range(count)]


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed_update(model, criterion, optimizer, sample, clock) -> float:
    start = clock()
    model.train()
    optimizer.zero_grad()
    loss, _, _ = criterion(model, sample)
    loss.backward()
    optimizer.step()
    return clock() - start


def updates_label(args) -> str:
    return f"{3 if args.quick else args.updates} timed updates per setting, batch {args.batch_size} sentences"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 timed updates per setting")
    parser.add_argument("--updates", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time (robust to other load)")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--terms", default=",".join(COMPARISONS), help="comma-separated subset of "
                        + ", ".join(COMPARISONS))
    parser.add_argument("--json")
    args = parser.parse_args()
    quiet_libraries(logging.ERROR)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]
    print(f"clock {args.clock}, torch threads {torch.get_num_threads()}, {updates_label(args)}", flush=True)
    updates = 3 if args.quick else args.updates
    torch.manual_seed(0)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_bin = binarize_context_corpus(Path(tmp), CorpusSizes(train=60, valid=4, test=4))
        for term in args.terms.split(","):
            arch, on_args, target = COMPARISONS[term]
            setups = {"off": build(data_bin, arch, BASELINE), "on": build(data_bin, arch, on_args)}
            samples = batches(setups["off"][0], args.batch_size, 4)
            times = {"off": [], "on": []}
            for step in range(updates + 2):
                for key, (_, model, criterion, optimizer) in setups.items():
                    elapsed = timed_update(model, criterion, optimizer, samples[step % len(samples)], clock)
                    if step >= 2:
                        times[key].append(elapsed)
            off, on = statistics.median(times["off"]), statistics.median(times["on"])
            ratio = on / off
            results[term] = {"arch": arch, "sec_per_update_off": off, "sec_per_update_on": on, "ratio": ratio,
                             "target": target, "met": None if target is None else ratio <= target}
            verdict = "" if target is None else (" (target <= %.2f: %s)" % (target, "met" if ratio <= target else "NOT met"))
            print(f"{term:14s} {arch:12s} off {off * 1000:7.1f} ms  on {on * 1000:7.1f} ms  ratio {ratio:.3f}{verdict}",
                  flush=True)
    print(f"load average: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"clock": args.clock, "threads": torch.get_num_threads(),
                                               "results": results}, indent=1))


if __name__ == "__main__":
    main()
