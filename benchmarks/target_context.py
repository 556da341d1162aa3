"""What target-side context (``--target-context-size``) costs hmce, with and without it in one run.

Usage: ``python -m benchmarks.target_context [--clock cpu] [--threads 1] [--out results.md]
[--json PATH]`` (``--help`` lists the rest).

Method
------
1. Document translation. Data: the generated ``target`` corpus (``fairseq-ctx-make-corpus
   --setting target``: the pronoun agrees with the synonym the previous translation picked)
   → prepare → fairseq-preprocess (``demo_binarize``). Two hmce models of the same small size
   (``--translate-size``), ``--context-size 1``, one with ``--target-context-size 1`` and one
   with 0, are trained ``--translate-updates`` updates with stock ``fairseq-train`` (so that
   both produce translations of the reference length, not arbitrary lengths), then translate
   the test documents with the hub (``fairseq_ctx.context.hub``, beam 5, ``--doc-batch-size``
   sentences per batch): without target context sentences of any position are batched
   together; with it sentence i of each document waits for sentence i-1's translation, so a
   batch holds sentence i of many documents. One warm-up document, then the whole test split
   is timed once; sentences/s and the ratio.
2. Training. Data: the generated standard corpus with ``--sentences-per-line`` sentences per
   line (``benchmarks/context_speed.py``'s data: realistic line lengths). hmce at ``--size``
   with ``--context-size N``, once with ``--target-context-size N`` (both contexts) and once
   with 0 (source only), built in-process through fairseq's parser and task; fixed batches
   of ``--batch-size`` lines, warm-up updates excluded, a timed update is forward + backward
   (``task.train_step``) + optimizer step; training words/s (target tokens / s), median over
   the timed updates, and the ratio.

Timings are wall-clock (``time.perf_counter``) or with ``--clock cpu`` this process's CPU time
(``time.process_time``), which other processes on a shared machine distort much less (use it
with ``--threads 1``). ``--out`` writes a Markdown results file with the date, the machine and
the command.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from benchmarks import context_speed as speed  # (silences the libraries' logging and warnings first)

import torch
from fairseq import optim, options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from devtools.results_file import script_command
from devtools.machine_facts import this_machine
from fairseq_ctx.context import hub
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes

TINY = speed.ModelSize(embed=64, ffn=128, heads=4, layers=2)
SIZES = {"tiny": TINY, **speed.SIZES}


@dataclass
class TranslationSpeed:
    """Document translation of the test split by one model (hub, beam 5)."""

    target_context_size: int
    sentences: int
    seconds: float
    sentences_per_s: float
    mean_output_tokens: float


@dataclass
class TrainingSpeed:
    """Timed training updates of one model (medians over the timed updates)."""

    target_context_size: int
    params: int
    train_words_per_s: float
    sec_per_update: float


def parse_cli(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--translate-size", choices=sorted(SIZES), default="tiny",
                        help="model size of the document-translation models (tiny: 64 dims, FFN 128, 4 heads, 2+2 "
                             "layers; medium; base)")
    parser.add_argument("--translate-updates", type=int, default=300, help="training updates of those models")
    parser.add_argument("--translate-docs", type=int, default=400, help="training documents of the target corpus")
    parser.add_argument("--test-docs", type=int, default=200, help="documents translated (timed)")
    parser.add_argument("--doc-batch-size", type=int, default=32, help="sentences per translation batch")
    parser.add_argument("--size", choices=sorted(SIZES), default="medium",
                        help="model size of the training-speed part (medium: 256 dims, FFN 1024, 4 heads, 3+3 "
                             "layers; base: the thesis' 512, 2048, 8, 6+6)")
    parser.add_argument("--context-size", type=int, default=2,
                        help="training part: previous sentences of the source context and of the target context")
    parser.add_argument("--sentences-per-line", type=int, default=3,
                        help="training part: generated sentences joined per line (3: ~17 tokens)")
    parser.add_argument("--batch-size", type=int, default=64, help="training part: lines per batch")
    parser.add_argument("--warmup-updates", type=int, default=2, help="training part: untimed updates")
    parser.add_argument("--updates", type=int, default=10, help="training part: timed updates per model")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall-clock time, or this process's CPU time (robust on a busy shared machine)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", metavar="PATH", help="write the results as Markdown (date, machine, command)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this JSON file")
    args = parser.parse_args(argv)
    for name in ("translate_updates", "translate_docs", "test_docs", "doc_batch_size", "context_size",
                 "sentences_per_line", "batch_size", "updates"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_updates < 0:
        parser.error("--warmup-updates must be >= 0")
    return args


def status(message: str) -> None:
    print(f"[target_context] {message}", file=sys.stderr, flush=True)


def train_translation_model(data_bin: Path, save_dir: Path, target_context_size: int,
                            args: argparse.Namespace) -> Path:
    """hmce trained with stock fairseq-train on the target corpus; returns the checkpoint directory."""
    command = [
        str(Path(sys.executable).parent / "fairseq-train"), str(data_bin), "--user-dir", speed.USER_DIR,
        "--task", "context_translation", "--context-size", "1", "--target-context-size", str(target_context_size),
        "--arch", "hmce", *SIZES[args.translate_size].fairseq_args(), "--optimizer", "adam",
        "--adam-betas", "(0.9,0.98)", "--lr", "3e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "2000",
        "--max-update", str(args.translate_updates), "--seed", str(args.seed), "--cpu", "--no-epoch-checkpoints",
        "--disable-validation", "--log-format", "none", "--save-dir", str(save_dir),
    ]
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}))
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"fairseq-train failed:\n{result.stderr[-3000:]}")
    return save_dir


def read_documents(path: Path) -> List[List[str]]:
    return [block.splitlines() for block in path.read_text(encoding="utf-8").strip("\n").split("\n\n")]


def time_translation(save_dir: Path, data_bin: Path, documents: List[List[str]], target_context_size: int,
                     batch_size: int) -> TranslationSpeed:
    translator = hub.load(str(save_dir), checkpoint_file="checkpoint_last.pt", data=str(data_bin), cpu=True)
    translator.translate_document(documents[0], batch_size=batch_size)
    lines = [line for number, doc in enumerate(documents) for line in ([""] if number else []) + doc]
    start = speed.CLOCK()
    outputs = [line for line in translator.translate_stream(lines, batch_size=batch_size) if line]
    seconds = speed.CLOCK() - start
    return TranslationSpeed(target_context_size, len(outputs), seconds, len(outputs) / seconds,
                            sum(len(line.split()) + 1 for line in outputs) / len(outputs))


def training_cfg(data_bin: Path, target_context_size: int, args: argparse.Namespace):
    input_args = [
        str(data_bin), "--user-dir", speed.USER_DIR, "--task", "context_translation",
        "--context-size", str(args.context_size), "--target-context-size", str(target_context_size),
        "--arch", "hmce", "--cpu", "--seed", str(args.seed), *SIZES[args.size].fairseq_args(),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "5e-4", "--batch-size", str(args.batch_size),
    ]
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), input_args))


def time_training(data_bin: Path, target_context_size: int, args: argparse.Namespace) -> TrainingSpeed:
    cfg = training_cfg(data_bin, target_context_size, args)
    torch.manual_seed(args.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
    batches = speed.fixed_batches(task, model, cfg, "train", args.warmup_updates + args.updates, shuffle=True)
    timed = speed.time_training(task, model, criterion, optimizer, batches, args.warmup_updates)
    return TrainingSpeed(target_context_size, sum(p.numel() for p in model.parameters()), **timed)


def report(args: argparse.Namespace, translation: Sequence[TranslationSpeed], training: Sequence[TrainingSpeed],
           load: Sequence[float], seconds: float) -> List[str]:
    doc_ratio = translation[0].sentences_per_s / translation[1].sentences_per_s
    train_ratio = training[0].train_words_per_s / training[1].train_words_per_s
    return [
        "# Target-side context: document translation and training speed",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {this_machine().describe()}; load average (1 min) before/after {load[0]:.2f}/{load[1]:.2f}",
        f"- Command: `{script_command('benchmarks/target_context.py', None)}`",
        f"- Timings: {args.clock} clock; total {seconds:.0f} s",
        "",
        f"Document translation (hub, beam 5, {args.doc_batch_size} sentences per batch; hmce {args.translate_size}, "
        f"--context-size 1, trained {args.translate_updates} updates on the generated target corpus; "
        f"{args.test_docs} test documents):",
        "",
        "| target context | sentences | seconds | sentences/s | output tokens/sentence |",
        "|---|---|---|---|---|",
        *(f"| {t.target_context_size} | {t.sentences} | {t.seconds:.2f} | {t.sentences_per_s:.1f} | "
          f"{t.mean_output_tokens:.2f} |" for t in translation),
        "",
        f"Training (hmce {args.size}, --context-size {args.context_size}, {args.batch_size} lines of "
        f"{args.sentences_per_line} generated sentences per batch, {args.warmup_updates} warm-up + "
        f"{args.updates} timed updates):",
        "",
        "| target context | params | training words/s | s/update |",
        "|---|---|---|---|",
        *(f"| {t.target_context_size} | {t.params / 1e6:.2f}M | {t.train_words_per_s:.0f} | {t.sec_per_update:.4f} |"
          for t in training),
        "",
        "| ratio | value |",
        "|---|---|",
        f"| document translation sentences/s, target context 1 / 0 | {doc_ratio:.3f} |",
        f"| training words/s, both contexts / source context only (N={args.context_size}) | {train_ratio:.3f} |",
    ]


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    speed.CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="target_context_") as tmp:
        root = Path(tmp)
        status("document translation: target corpus, training two hmce models")
        data_bin = binarize_context_corpus(root / "target", CorpusSizes(args.translate_docs, 10, args.test_docs),
                                           seed=args.seed, setting="target")
        documents = read_documents(root / "target" / "raw" / "test.en")
        translation = []
        for size in (1, 0):
            save_dir = train_translation_model(data_bin, root / f"hmce-target{size}", size, args)
            status(f"translating {args.test_docs} documents, --target-context-size {size}")
            translation.append(time_translation(save_dir, data_bin, documents, size, args.doc_batch_size))
        status("training speed: standard corpus")
        speed.build_data(root / "speed", args.seed, (args.warmup_updates + args.updates) * args.batch_size * 2,
                         args.batch_size, args.sentences_per_line)
        training = []
        for size in (args.context_size, 0):
            status(f"timing hmce training, --target-context-size {size}")
            training.append(time_training(root / "speed" / "data-bin", size, args))
    load, seconds = (load_before, os.getloadavg()[0]), time.perf_counter() - started
    lines = report(args, translation, training, load, seconds)
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "settings": {k: v for k, v in vars(args).items() if k not in ("out", "json")},
            "translation": [asdict(t) for t in translation], "training": [asdict(t) for t in training],
            "load_average_before_after": list(load), "total_seconds": seconds,
        }, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
