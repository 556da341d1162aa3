"""Training words/s of tmde, tmde + distance_constraint (thesis form; and with
--distance-detach-target) and laser_bilstm (same batches, one run), and embedding throughput /
peak memory of the streaming embedder.

Target: the distance constraint costs <= 15% of tmde's training speed (thesis: 35%).

``--size thesis`` (default) is the thesis's Table 4.1 setting: ``ct_mde`` (1024 dims, 16 heads,
FFN 4096, 6 encoder / 1 decoder layers, pre-norm) and LASER with a 5-layer BiLSTM (512 per
direction, decoder 2048), a 50K-type shared dictionary (the generated corpus's dictionary padded
with unused types: the softmax and embedding tables have the thesis's size) and lines of ~27 tokens
(4 generated sentences joined, Europarl's mean sentence length), batches of <= 1500 tokens, 8 timed
steps. ``--size small`` is the demo's scale: 128-dim models, 3 encoder layers, the corpus's own 236
types and ~7-token sentences, batches of <= 2000 tokens, 60 timed steps. The share of the target
encoder pass in a training step depends on how much of the step the encoder is, so only the
thesis setting measures the thesis's ratio (the small one overstates it: no 50K softmax).

The models take turns on every batch (round robin, untimed warm-up steps first), so load changes on
a shared machine hit all of them alike. On a shared machine use ``--clock cpu --threads 1``:
process CPU time of one intra-op thread is not inflated by other users' load. Embedding
throughput is measured with the small tmde on the chosen corpus (10% of ``--lines`` and all of it).
Usage: python -m benchmarks.embedding_speed [--size thesis|small] [--steps N] [--lines 100000]
[--clock cpu] [--threads 1]
"""
import argparse
import os
import random
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import fairseq_ctx
fairseq_ctx.register()
from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual
from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus
from fairseq_ctx.embedding.embedder import Embedder, embed_file

PAIRS = "xa-pa,xa-pb,pa-pb,pb-pa"
LANGS = ["pa", "pb", "xa"]
SMALL_TRANSFORMER = ["--arch", "tmde", "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
                     "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads",
                     "4", "--decoder-attention-heads", "4", "--encoder-layers", "3", "--dropout", "0.1"]


@dataclass(frozen=True)
class Setting:
    """Model flags, corpus shape and batching of one benchmark size."""
    transformer: Tuple[str, ...]
    laser: Tuple[str, ...]
    dictionary_size: int  # 0: the corpus's own types
    sentences_per_line: int
    max_tokens: int
    steps: int
    warmup: int


SETTINGS = {
    "thesis": Setting(transformer=("--arch", "ct_mde"),
                      laser=("--arch", "laser_bilstm", "--encoder-layers", "5"),
                      dictionary_size=50000, sentences_per_line=4, max_tokens=1500, steps=8, warmup=2),
    "small": Setting(transformer=tuple(SMALL_TRANSFORMER),
                     laser=("--arch", "laser_bilstm", "--encoder-embed-dim", "128", "--encoder-hidden-size", "128",
                            "--decoder-embed-dim", "128", "--decoder-hidden-size", "192",
                            "--decoder-lang-embed-dim", "16", "--dropout", "0.1"),
                     dictionary_size=0, sentences_per_line=1, max_tokens=2000, steps=60, warmup=3),
}
PLAIN = ["--criterion", "label_smoothed_cross_entropy"]
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def build(data: Path, model_flags: Sequence[str], extra: Sequence[str]):
    """Task, model and criterion exactly as fairseq-train would build them from these flags."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data), "--user-dir", os.path.dirname(fairseq_ctx.__file__), "--task", "multilingual_embedding",
        "--lang-pairs", PAIRS, "--criterion", "distance_constraint", "--label-smoothing", "0.1",
        "--cpu", "--seed", "1", *model_flags, *extra,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


class TimedTrainer:
    """One model, its criterion and optimizer, timed step by step on the shared batches."""

    def __init__(self, data: Path, model_flags: Sequence[str], extra: Sequence[str]):
        task, self.model, self.criterion = build(data, model_flags, extra)
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


def train_wps(data: Path, models: Dict[str, tuple], setting: Setting, steps: int,
              clock: Callable[[], float]) -> Dict[str, tuple]:
    """Training words/s of every model. The models take turns on each batch (round robin), so a
    change in the machine's load during the run affects all of them alike; untimed warm-up first."""
    trainers = {name: TimedTrainer(data, flags, extra) for name, (flags, extra) in models.items()}
    task = next(iter(trainers.values())).criterion.task
    task.load_dataset("train")
    dataset = task.datasets["train"]
    every = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=setting.max_tokens)
    chosen = random.Random(0).sample(list(every), min(len(every), steps + setting.warmup))  # all lengths, not the shortest
    batches = [dataset.collater([dataset[i] for i in b]) for b in chosen]
    for index, sample in enumerate(batches):
        for trainer in trainers.values():
            trainer.step(sample, clock, timed=index >= setting.warmup)
    return {name: (t.words / t.seconds, t.params) for name, t in trainers.items()}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def embedding_throughput(data: Path, raw: Path, work: Path, counts: List[int], clock: Callable[[], float]) -> None:
    """Runs before any training so the process peak RSS reflects the embedder, not the trainers."""
    task, model, _ = build(data, SMALL_TRANSFORMER, PLAIN)
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


def join_lines(raw: Path, count: int) -> None:
    """Every ``count`` consecutive sentences of each split and language become one line (the
    languages stay aligned: their files are parallel line by line)."""
    for path in raw.glob("*.*"):
        if path.name.split(".")[1] in ("doc", "all"):
            continue
        lines = path.read_text().splitlines()
        path.write_text("".join(" ".join(lines[i:i + count]) + "\n" for i in range(0, len(lines), count)))


def pad_dictionaries(data: Path, size: int) -> None:
    """Append unused types to every dictionary of ``data`` until it has ``size`` entries
    (fairseq adds 4 special symbols on load), so the softmax and embeddings have that size."""
    for path in data.glob("dict*.txt"):
        entries = path.read_text().splitlines()
        extra = size - 4 - len(entries)
        if extra > 0:
            path.write_text("\n".join(entries + [f"unused{i} 0" for i in range(extra)]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SETTINGS), default="thesis",
                        help="thesis: Table 4.1 sizes, 50K types, ~27-token lines; small: the demo's scale")
    parser.add_argument("--steps", type=int, default=0, help="timed steps per model (0: 8 thesis, 60 small)")
    parser.add_argument("--lines", type=int, default=100000)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time (robust on a shared machine)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: min(2, cores))")
    args = parser.parse_args()
    torch.set_num_threads(args.threads or max(1, min(2, os.cpu_count() or 1)))
    clock = CLOCKS[args.clock]
    setting = SETTINGS[args.size]
    print(f"size {args.size}, clock {args.clock}, {torch.get_num_threads()} thread(s)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_multilingual_corpus(str(root / "raw"), MultilingualSizes(200 * setting.sentences_per_line, 10, 60),
                                  seed=3)
        join_lines(root / "raw", setting.sentences_per_line)
        data = binarize_multilingual(root / "raw", root / "data-bin", PAIRS.split(","), LANGS)
        embedding_throughput(data, root / "raw", root, [args.lines // 10, args.lines], clock)
        pad_dictionaries(data, setting.dictionary_size)
        models = {"tmde": (setting.transformer, PLAIN),
                  "tmde + distance_constraint": (setting.transformer, []),
                  "tmde + distance_constraint, detached target": (setting.transformer, ["--distance-detach-target"]),
                  "laser_bilstm": (setting.laser, PLAIN)}
        results = train_wps(data, models, setting, args.steps or setting.steps, clock)
        print("| model | params | train words/s | relative to tmde |\n|---|---|---|---|")
        base = results["tmde"][0]
        for name, (wps, params) in results.items():
            print(f"| {name} | {params / 1e6:.2f}M | {wps:.0f} | {wps / base:.2f} |")
        for name in ("tmde + distance_constraint", "tmde + distance_constraint, detached target"):
            cost = 1 - results[name][0] / base
            print(f"{name}: costs {100 * cost:.1f}% of tmde's speed (target <= 15%, thesis 35%)")


if __name__ == "__main__":
    main()
