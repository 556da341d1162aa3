"""Training words/s of tmde, tmde + distance_constraint (thesis form, and with
--distance-detach-target) and laser_bilstm (similar parameter counts, same batches, one run),
and embedding throughput / peak memory of the streaming embedder.

Target (issue 6): the distance constraint costs <= 15% of tmde's training speed (thesis: 35%).
Sizes: 128-dim models, 3 encoder layers / 1 decoder layer, the generated 4-pair corpus (236 types),
batches of <= 2000 tokens. The models take turns on every batch (round robin, 3 untimed warm-up
steps, 60 timed by default), so load changes on a shared machine hit all of them alike.
On a shared machine use ``--clock cpu --threads 1``: process CPU time of one intra-op thread is
not inflated by other users' load, so the ratios stay meaningful.
Usage: python benchmarks/embedding_speed.py [--steps 60] [--lines 100000] [--clock cpu] [--threads 1]
"""
import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import fairseq_ctx
from fairseq_ctx.cli.embed import Embedder, embed_file
from fairseq_ctx.data.multilingual_binarize import binarize_multilingual
from fairseq_ctx.data.multilingual_corpus import MultilingualSizes, write_multilingual_corpus

PAIRS = "xa-pa,xa-pb,pa-pb,pb-pa"
TRANSFORMER = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "256",
               "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
               "--encoder-layers", "3", "--dropout", "0.1"]
LASER = ["--encoder-embed-dim", "128", "--encoder-hidden-size", "128", "--decoder-embed-dim", "128",
         "--decoder-hidden-size", "192", "--decoder-lang-embed-dim", "16", "--dropout", "0.1"]
PLAIN = ["--criterion", "label_smoothed_cross_entropy"]
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def build(data: Path, arch: str, extra: Sequence[str]):
    """Task, model and criterion exactly as fairseq-train would build them from these flags."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data), "--user-dir", os.path.dirname(fairseq_ctx.__file__), "--task", "multilingual_embedding",
        "--lang-pairs", PAIRS, "--arch", arch, "--criterion", "distance_constraint", "--label-smoothing", "0.1",
        "--cpu", "--seed", "1", *(LASER if arch == "laser_bilstm" else TRANSFORMER), *extra,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


class TimedTrainer:
    """One model, its criterion and optimizer, timed step by step on the shared batches."""

    def __init__(self, data: Path, arch: str, extra: Sequence[str]):
        task, self.model, self.criterion = build(data, arch, extra)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.model.train()
        self.params = sum(p.numel() for p in self.model.parameters())
        self.words, self.seconds = 0, 0.0

    def step(self, sample, clock: Callable[[], float], timed: bool) -> None:
        start = clock()
        self.optimizer.zero_grad()
        self.criterion(self.model, sample)[0].backward()
        self.optimizer.step()
        if timed:
            self.seconds += clock() - start
            self.words += sample["ntokens"]


def train_wps(data: Path, models: Dict[str, tuple], steps: int, clock: Callable[[], float]) -> Dict[str, tuple]:
    """Training words/s of every model. The models take turns on each batch (round robin), so a
    change in the machine's load during the run affects all of them alike; 3 untimed warm-up steps."""
    trainers = {name: TimedTrainer(data, arch, extra) for name, (arch, extra) in models.items()}
    task = next(iter(trainers.values())).criterion.task
    task.load_dataset("train")
    dataset = task.datasets["train"]
    batches = [dataset.collater([dataset[i] for i in b])
               for b in dataset.batch_by_size(dataset.ordered_indices(), max_tokens=2000)[:steps + 3]]
    for index, sample in enumerate(batches):
        for trainer in trainers.values():
            trainer.step(sample, clock, timed=index >= 3)
    return {name: (t.words / t.seconds, t.params) for name, t in trainers.items()}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def embedding_throughput(data: Path, raw: Path, work: Path, counts: List[int], clock: Callable[[], float]) -> None:
    """Runs before any training so the process peak RSS reflects the embedder, not the trainers."""
    task, model, _ = build(data, "tmde", PLAIN)
    embedder = Embedder.from_model(model, task)
    sentences = (raw / "test.xa").read_text().splitlines()
    lines_path = work / "lines.txt"
    print(f"peak RSS before embedding: {peak_rss_mb():.0f} MB")
    for count in counts:
        with open(lines_path, "w") as handle:
            for i in range(count):
                handle.write(sentences[i % len(sentences)] + "\n")
        start = clock()
        embed_file(embedder, str(lines_path), str(work / "out.npy"), max_tokens=12000, chunk_lines=20000)
        seconds = clock() - start
        print(f"embed {count} lines: {count / seconds:.0f} sentences/s, process peak RSS so far {peak_rss_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lines", type=int, default=100000)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time (robust on a shared machine)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: min(2, cores))")
    args = parser.parse_args()
    torch.set_num_threads(args.threads or max(1, min(2, os.cpu_count() or 1)))
    clock = CLOCKS[args.clock]
    print(f"clock {args.clock}, {torch.get_num_threads()} thread(s)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_multilingual_corpus(str(root / "raw"), MultilingualSizes(200, 10, 60), seed=3)
        data = binarize_multilingual(root / "raw", root / "data-bin", PAIRS.split(","), ["pa", "pb", "xa"])
        embedding_throughput(data, root / "raw", root, [args.lines // 10, args.lines], clock)
        models = {"tmde": ("tmde", PLAIN),
                  "tmde + distance_constraint": ("tmde", []),
                  "tmde + distance_constraint, detached target": ("tmde", ["--distance-detach-target"]),
                  "laser_bilstm": ("laser_bilstm", PLAIN)}
        results = train_wps(data, models, args.steps, clock)
        print("| model | params | train words/s | relative to tmde |\n|---|---|---|---|")
        base = results["tmde"][0]
        for name, (wps, params) in results.items():
            print(f"| {name} | {params / 1e6:.2f}M | {wps:.0f} | {wps / base:.2f} |")
        for name in ("tmde + distance_constraint", "tmde + distance_constraint, detached target"):
            cost = 1 - results[name][0] / base
            print(f"{name}: costs {100 * cost:.1f}% of tmde's speed (target <= 15%, thesis 35%)")


if __name__ == "__main__":
    main()
