"""Quality as the context grows: BLEU and context accuracy of concatenation (plain and focused),
the caching models, sequence shortening (latent grouping) and hmce at context sizes 1 to 8 on the generated demo corpus, beside the sentence-level
transformer; writes ``examples/context_mt/results/context_size_{setting}.{md,json}``.

Usage: python -m examples.context_mt.context_size --work DIR [--sizes 1 2 4 8] [--archs ...]
(needs the package's console scripts on PATH, e.g. ``PATH=.venv/bin:$PATH``).

Mąka et al. (2024, "Sequence Shortening for Context-aware Machine Translation", EACL Findings)
report that concatenation collapses as the context grows to 6-10 sentences while caching tokens
holds its quality; this recipe measures that property here. Every run has the budget of
``compare.py`` (same data, model size, optimizer, batches, updates, seed; float32). ``--setting
hard`` (the default) puts most antecedents 3-4 sentences back behind distractor nouns, so a
model needs N >= 3-4 to resolve them. Each run keeps its result in ``DIR/ARCH-N/``; run the same
command again to go on after an interruption (finished runs are read back, not repeated).
"""
import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Dict, List

from devtools.arch_matrix import context_arch_options
from devtools.machine_facts import this_machine
from devtools.results_file import script_command
from examples.context_mt.compare import HERE, TOOL_ENV, prepare_data, train_and_generate, train_words_per_s

ARCHS = ["ctx_concat", "focused_concat", "caching_tokens", "caching_sentence", "shortening_grouping", "hmce"]
# Sizes in this order, so that an interrupted run has the extremes and the doublings first.
RUN_ORDER = [1, 2, 4, 8, 3, 6, 5, 7]


def run_one(work: Path, data: Path, arch: str, size: int, args: argparse.Namespace) -> Dict:
    """One trained and scored model, read back from ``work/ARCH-N/result.json`` when done before."""
    out = work / f"{arch}-{size}"
    done = out / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    started = time.time()
    trained = train_and_generate(work, data, arch, size, args.updates, args.batch_size, out, *context_arch_options(arch, size))
    result = {"arch": arch, "context_size": size, "bleu": trained["scores"]["bleu"],
              "context_accuracy": trained["scores"]["context_accuracy"],
              "train_words_per_s": train_words_per_s(trained["train_log"]), "minutes": (time.time() - started) / 60}
    done.write_text(json.dumps(result, indent=2))
    return result


def write_results(rows: List[Dict], args: argparse.Namespace, destination: Path, minutes: float) -> None:
    sizes = sorted({r["context_size"] for r in rows if r["arch"] != "transformer"})
    archs = [a for a in args.archs if any(r["arch"] == a for r in rows)]
    cell = {(r["arch"], r["context_size"]): r for r in rows}
    sentence = cell.get(("transformer", 0))
    lines = [
        f"# Quality as the context grows, generated demo corpus ({args.setting} setting)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d')}; machine: {this_machine(int(TOOL_ENV['OMP_NUM_THREADS'])).describe()}",
        f"- Command: `{script_command('examples/context_mt/context_size.py', None)}`",
        f"- Budget per model: {args.updates} updates of {args.batch_size} sentences, float32, seed 1, "
        f"{args.train_docs} training documents (the budget of `compare.py`); minutes of train + generate + score "
        f"summed over the runs: {minutes:.0f}",
        "- One run per cell (one seed): differences of a few points are within what a seed changes.",
        "",
    ]
    if sentence:
        lines += [f"Sentence-level transformer: BLEU {sentence['bleu']:.2f}, context accuracy "
                  f"{sentence['context_accuracy']:.3f} (chance: 1/3).", ""]
    for metric, title, fmt in (("context_accuracy", "Context accuracy", "{:.3f}"), ("bleu", "BLEU", "{:.2f}"),
                               ("train_words_per_s", "Training words/s (fairseq-train's median wps; one run, indicative)",
                                "{:.0f}")):
        lines += [f"## {title}", "", "| model | " + " | ".join(f"N={n}" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for arch in archs:
            values = [fmt.format(cell[(arch, n)][metric]) if (arch, n) in cell else "" for n in sizes]
            lines.append(f"| {arch} | " + " | ".join(values) + " |")
        lines.append("")
    lines += [
        "- context accuracy: share of the test sentences whose pronoun depends on a previous sentence that get",
        "  the right pronoun (er/sie/es), `fairseq-ctx-score --context-key`;",
        "- BLEU: sacrebleu on fairseq-generate's output (beam 5).",
        "",
    ]
    destination.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="scratch directory, kept so that a second run goes on")
    parser.add_argument("--sizes", type=int, nargs="+", default=RUN_ORDER, help="context sizes N to train")
    parser.add_argument("--archs", nargs="+", default=ARCHS, help="context models to train at every N")
    parser.add_argument("--updates", type=int, default=300, help="training updates per model")
    parser.add_argument("--train-docs", type=int, default=400, help="training documents of the generated corpus")
    parser.add_argument("--batch-size", type=int, default=64, help="training sentences per batch")
    parser.add_argument("--setting", choices=("standard", "hard"), default="hard",
                        help="generated corpus setting (fairseq-ctx-make-corpus --setting)")
    parser.add_argument("--out", default=str(HERE / "results"), help="where context_size_{setting}.{md,json} go")
    args = parser.parse_args()
    if any(n < 1 for n in args.sizes):
        parser.error("--sizes must be >= 1")
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    data = work / "data-bin"
    if not (work / "data.done").exists():
        for partial in ("raw", "prep", "data-bin", "contrastive"):
            shutil.rmtree(work / partial, ignore_errors=True)
        data = prepare_data(work, args.train_docs, args.setting)
        (work / "data.done").write_text("")
    rows = [run_one(work, data, "transformer", 0, args)]
    for size in args.sizes:
        for arch in args.archs:
            rows.append(run_one(work, data, arch, size, args))
            print(json.dumps(rows[-1]), flush=True)
            destination = out / f"context_size_{args.setting}"
            destination.with_suffix(".json").write_text(json.dumps(rows, indent=2))
            write_results(rows, args, destination.with_suffix(".md"), sum(r["minutes"] for r in rows))


if __name__ == "__main__":
    main()
