"""Two cores, two ways: one training with two intra-op threads, or two trainings with one thread
each at the same time. Prints the training words/s of the machine in both cases and their ratio,
which decides the recipes' default (``--jobs 2 --threads 1`` when two single-thread runs do more).

Each training is a separate process running fairseq's ``Trainer`` (``--cpu``, with or without
``--amp``) on the same generated batches as ``benchmarks/cpu_mixed_precision.py`` for one of its
models (default: the Multi30k recipes' 256-dim Transformer). Throughput is wall time: the words
trained by all processes of a setting divided by the time until the last one finishes, after
untimed warm-up updates. Needs an otherwise idle machine (the load average is printed).

    python -m benchmarks.cpu_threads [--model transformer] [--amp] [--updates 14] [--results DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent


def worker(args: argparse.Namespace) -> None:
    """One training process: warm-up, then timed updates; prints its words and seconds as JSON."""
    import torch

    from benchmarks import cpu_mixed_precision as bench

    torch.set_num_threads(args.threads)
    model = next(m for m in bench.models(args.dims) if m.name == args.model)
    trainer = bench.trainer(Path(args.data), model, args.amp, args.max_tokens)
    samples = bench.batches(trainer, "train", args.warmup + args.updates, model.batch_sentences)
    for sample in samples[:args.warmup]:
        trainer.train_step([sample])
    start = time.perf_counter()
    for sample in samples[args.warmup:]:
        trainer.train_step([sample])
    print(json.dumps({"words": sum(s["ntokens"] for s in samples[args.warmup:]),
                      "seconds": time.perf_counter() - start}))


def setting(args: argparse.Namespace, data: Path, processes: int, threads: int) -> Dict[str, float]:
    command = [sys.executable, "-m", "benchmarks.cpu_threads", "--worker", "--data", str(data), "--threads", str(threads),
               *passed_on(args)]
    started = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=HERE.parent) for _ in range(processes)]
    results = []
    for process in started:
        output, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"cpu_threads: a training process failed (exit {process.returncode})")
        results.append(json.loads(output.strip().splitlines()[-1]))
    words = sum(r["words"] for r in results)
    return {"processes": processes, "threads": threads, "words": words,
            "words_per_s": words / max(r["seconds"] for r in results)}


def passed_on(args: argparse.Namespace) -> List[str]:
    return ["--model", args.model, "--dims", str(args.dims), "--updates", str(args.updates),
            "--warmup", str(args.warmup), "--max-tokens", str(args.max_tokens), *(["--amp"] if args.amp else [])]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="transformer", help="a model of benchmarks/cpu_mixed_precision.py")
    parser.add_argument("--dims", type=int, default=256, choices=(256, 512))
    parser.add_argument("--amp", action="store_true", help="bfloat16 mixed precision (fairseq --amp)")
    parser.add_argument("--updates", type=int, default=14, help="timed updates per process")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=2000, help="tokens per batch")
    parser.add_argument("--results", help="directory for cpu_threads.{md,json}")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    from benchmarks import cpu_mixed_precision as bench
    from devtools.machine_facts import this_machine, utc_now
    from devtools.results_file import results_page, script_command, write_results

    model = next(m for m in bench.models(args.dims) if m.name == args.model)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        data = bench.generated_data(Path(tmp), model.data)
        load = os.getloadavg()[0]
        rows = [setting(args, data, 1, 2), setting(args, data, 2, 1)]
    ratio = rows[1]["words_per_s"] / rows[0]["words_per_s"]
    better = "two trainings with one thread each" if ratio > 1 else "one training with two threads"
    header = {
        "date": utc_now(),
        "machine": this_machine(torch_threads=2).describe(), "load average before": f"{load:.2f}",
        "model": f"{args.model}, {args.dims} dims, {'--amp' if args.amp else 'float32'}, {args.max_tokens} tokens per batch",
        "updates": f"{args.warmup} untimed + {args.updates} timed per process", "wall time": f"{time.time() - start:.0f} s",
        "command": script_command("benchmarks/cpu_threads.py", argv),
    }
    lines = ["| setting | words/s of the machine |", "|---|---|"]
    lines += [f"| {r['processes']} process(es) × {r['threads']} thread(s) | {r['words_per_s']:.0f} |" for r in rows]
    lines += ["", f"Two single-thread trainings / one two-thread training: **{ratio:.2f}** — {better} does more."]
    page = results_page("Two cores: one training with two threads, or two with one thread each", header, lines)
    print(page)
    write_results(args.results, "cpu_threads", page, {**header, "rows": rows, "ratio": ratio})


if __name__ == "__main__":
    main()
