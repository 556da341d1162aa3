"""Train the sentence-level transformer and the six context models on the generated demo
corpus with the same budget and write ``examples/context_mt/results/compare_{setting}.md``
(+ ``.json`` and a bar chart ``.png``).

Usage: python -m examples.context_mt.compare [--setting standard|hard] [--updates 300]
(needs the package's console scripts on PATH, e.g. ``PATH=.venv/bin:$PATH``). ``--setting hard``
puts most antecedents 3-4 sentences back behind distractor nouns; the context models then read
``--context-size 4`` previous sentences.

Per model: fairseq-train (same size, optimizer, batches, updates, seed) → fairseq-generate
(beam 5) → fairseq-ctx-score (BLEU, context accuracy) → fairseq-ctx-subset-bleu (pronoun vs
other sentences) → fairseq-ctx-cxmi → fairseq-ctx-contrastive on a generated contrastive set.
Parameters, training words/s (median of fairseq's per-epoch ``wps``) and generation tokens/s
(fairseq-generate's own count) come from the tools' logs.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence


from devtools.results_file import script_command
from devtools.machine_facts import this_machine
from fairseq_ctx.core.plots import PlotsUnavailableError, pyplot, require_plots

ARCHS = ["transformer", "ctx_concat", "dat", "han", "dct", "hce", "hmce"]
MODEL = ["--share-all-embeddings", "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
         "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256", "--encoder-layers", "2",
         "--decoder-layers", "2", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
HERE = Path(__file__).resolve().parent


# One intra-op thread per tool unless the caller says otherwise: these models are small, and
# two spinning OpenMP threads per process slow a shared machine down many times over.
TOOL_ENV = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def run(args: List[str], log: Path = None) -> str:
    result = subprocess.run(args, capture_output=True, text=True, env=TOOL_ENV)
    if log is not None:
        log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def prepare_data(work: Path, train_docs: int, setting: str) -> Path:
    run(["fairseq-ctx-make-corpus", str(work / "raw"), "--train-docs", str(train_docs), "--seed", "1",
         "--setting", setting])
    for split in ("train", "valid", "test"):
        run(["fairseq-ctx-prepare-docs", "--src-docs", str(work / f"raw/{split}.en"), "--tgt-docs",
             str(work / f"raw/{split}.de"), "--out-prefix", str(work / f"prep/{split}"), "--src-lang", "en",
             "--tgt-lang", "de"])
    data = work / "data-bin"
    run(["fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", str(work / "prep/train"),
         "--validpref", str(work / "prep/valid"), "--testpref", str(work / "prep/test"), "--destdir", str(data),
         "--joined-dictionary", "--workers", "1"])
    for split in ("train", "valid", "test"):
        shutil.copy(work / f"prep/{split}.docids", data / f"{split}.docids")
    keys = (work / "raw/test.ctxkey").read_text().splitlines()
    (work / "helpful.ids").write_text("".join(f"{i}\n" for i, k in enumerate(keys) if k))
    (work / "unhelpful.ids").write_text("".join(f"{i}\n" for i, k in enumerate(keys) if not k))
    run(["fairseq-ctx-make-contrastive", str(work / "contrastive"), "--docs", "60", "--context-size", "2"])
    return data


def train_and_generate(work: Path, data: Path, arch: str, context_size: int, updates: int, batch_size: int,
                       out: Path, task_args: Sequence[str] = (), train_args: Sequence[str] = ()) -> Dict:
    """fairseq-train (the same budget for every model) → fairseq-generate (beam 5) →
    fairseq-ctx-score in ``out``; the checkpoint, logs and scores. ``task_args`` go to both tools,
    ``train_args`` to fairseq-train after the common budget (a later option wins)."""
    user_dir = run(["fairseq-ctx-user-dir"]).strip()
    out.mkdir(parents=True, exist_ok=True)
    common = [str(data), "--user-dir", user_dir, "--task", "context_translation", "--context-size", str(context_size),
              "--cpu", *task_args]
    run(["fairseq-train", *common, "--arch", arch, *MODEL, "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
         "--lr", "2e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "150", "--criterion",
         "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--dropout", "0.1", "--batch-size", str(batch_size),
         "--max-update", str(updates), "--seed", "1", "--save-dir", str(out / "checkpoints"),
         "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1000", *train_args], out / "train.log")
    checkpoint = out / "checkpoints/checkpoint_best.pt"
    generated = run(["fairseq-generate", *common, "--path", str(checkpoint), "--gen-subset", "test", "--beam", "5",
                     "--batch-size", "64", "--required-batch-size-multiple", "1"], out / "generate.log")
    (out / "generate.out").write_text(generated)
    scores = json.loads(_json_of(["fairseq-ctx-score", str(out / "generate.out"), "--context-key",
                                  str(work / "raw/test.ctxkey")], out / "score.json"))
    return {"checkpoint": checkpoint, "train_log": (out / "train.log").read_text(),
            "generate_log": (out / "generate.log").read_text(), "scores": scores}


def train_words_per_s(train_log: str) -> float:
    """Median of fairseq-train's per-epoch ``wps``."""
    return statistics.median(float(v) for v in re.findall(r"\| epoch \d+ \|.*?\| wps ([\d.]+)", train_log))


def evaluate(work: Path, data: Path, arch: str, context_size: int, updates: int, batch_size: int) -> Dict:
    out = work / arch
    trained = train_and_generate(work, data, arch, context_size, updates, batch_size, out)
    checkpoint, train_log, gen_log, scores = (trained["checkpoint"], trained["train_log"], trained["generate_log"],
                                                trained["scores"])
    subsets = json.loads(_json_of(["fairseq-ctx-subset-bleu", str(out / "generate.out"), "--helpful",
                                   str(work / "helpful.ids"), "--unhelpful", str(work / "unhelpful.ids")],
                                  out / "subsets.json"))
    cxmi = json.loads(_json_of(["fairseq-ctx-cxmi", str(checkpoint), "--data", str(data), "--gen-subset", "test",
                                "--cpu"], out / "cxmi.json"))
    c = work / "contrastive/contrastive"
    contrastive = json.loads(_json_of(
        ["fairseq-ctx-contrastive", str(checkpoint), "--data", str(data), "--cpu", "--source", f"{c}.src.en",
         "--reference", f"{c}.ref.de", "--contrastive", f"{c}.contrastive0.de", f"{c}.contrastive1.de",
         "--context", f"{c}.context0.en", f"{c}.context1.en", "--categories", f"{c}.category"],
        out / "contrastive.json"))
    return {
        "arch": arch,
        "context_size": context_size,
        "bleu": scores["bleu"],
        "context_accuracy": scores["context_accuracy"],
        "bleu_helpful": subsets["bleu_helpful"],
        "bleu_unhelpful": subsets["bleu_unhelpful"],
        "cxmi": cxmi["cxmi"],
        "contrastive_accuracy": contrastive["accuracy"],
        "params": int(re.search(r"num\. shared model params: ([\d,]+)", train_log).group(1).replace(",", "")),
        "train_words_per_s": train_words_per_s(train_log),
        "gen_tokens_per_s": float(re.search(r"sentences/s, ([\d.]+) tokens/s", gen_log).group(1)),
    }


def _json_of(args: List[str], path: Path) -> str:
    run([*args, "--json", str(path)])
    return path.read_text()


def write_results(rows: List[Dict], args: argparse.Namespace, destination: Path, started: float) -> None:
    lines = [
        f"# Context models on the generated demo corpus ({args.setting} setting)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d', time.localtime(started))}; "
        f"machine: {this_machine(int(TOOL_ENV['OMP_NUM_THREADS'])).describe()}",
        f"- Command: `{script_command('examples/context_mt/compare.py', None)}`",
        f"- Updates: {args.updates} per model, {args.batch_size} sentences per batch; wall time of the whole "
        f"run so far: {(time.time() - started) / 60:.0f} min",
        "",
        "Same data, model size (128 dims, 2+2 layers, 4 heads, shared embeddings), optimizer, batches,",
        "updates and seed for every model. The two speed columns are wall-clock rates of single runs,",
        "only indicative; `benchmarks/context_speed.py` measures speed on fixed batches.",
        "",
        "| model | N | BLEU | context acc. | BLEU pronoun / other (gap) | CXMI (nats/sent.) | contrastive acc. "
        "| params | train words/s | generate tokens/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gap = r["bleu_unhelpful"] - r["bleu_helpful"]
        lines.append(
            f"| {r['arch']} | {r['context_size']} | {r['bleu']:.2f} | {r['context_accuracy']:.3f} | "
            f"{r['bleu_helpful']:.1f} / {r['bleu_unhelpful']:.1f} ({gap:+.1f}) | {r['cxmi']:.3f} | "
            f"{r['contrastive_accuracy']:.3f} | {r['params'] / 1e3:.0f}k | {r['train_words_per_s']:.0f} | "
            f"{r['gen_tokens_per_s']:.0f} |")
    lines += [
        "",
        "- context acc.: share of the test sentences whose pronoun depends on a previous sentence that get the",
        "  right pronoun (er/sie/es; a sentence-level model is at chance, 1/3);",
        "- BLEU pronoun / other: `fairseq-ctx-subset-bleu` with the pronoun sentences as the helpful-context",
        "  subset and all others as the unhelpful one (gap = other − pronoun);",
        "- CXMI: `fairseq-ctx-cxmi`, mean log p(y|x,C) − log p(y|x) over the test sentences;",
        "- contrastive acc.: `fairseq-ctx-contrastive` on `fairseq-ctx-make-contrastive --docs 60`",
        "  (correct pronoun vs the two wrong ones; antecedents 1-2 sentences back in both settings);",
        "- train words/s: median of fairseq-train's per-epoch `wps`; generate tokens/s: fairseq-generate, beam 5.",
        "",
        f"![comparison]({destination.with_suffix('.png').name})",
        "",
    ]
    destination.write_text("\n".join(lines), encoding="utf-8")


def plot(rows: List[Dict], destination: Path) -> None:
    plt = pyplot()

    metrics = [("bleu", "BLEU"), ("context_accuracy", "context accuracy"),
               ("contrastive_accuracy", "contrastive accuracy"), ("train_words_per_s", "train words/s")]
    figure, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.4))
    names = [r["arch"] for r in rows]
    for axis, (key, title) in zip(axes, metrics):
        axis.bar(names, [r[key] for r in rows], color=["#999999"] + ["#4c72b0"] * (len(rows) - 1))
        axis.set_title(title)
        axis.tick_params(axis="x", rotation=60)
    figure.tight_layout()
    figure.savefig(destination, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="work/compare", help="scratch directory (recreated)")
    parser.add_argument("--updates", type=int, default=300, help="training updates per model")
    parser.add_argument("--train-docs", type=int, default=400, help="training documents of the generated corpus")
    parser.add_argument("--batch-size", type=int, default=64, help="training sentences per batch")
    parser.add_argument("--setting", choices=("standard", "hard"), default="standard",
                        help="generated corpus setting (fairseq-ctx-make-corpus --setting)")
    parser.add_argument("--context-size", type=int, default=None,
                        help="previous sentences the context models read (default: 2, or 4 with --setting hard)")
    parser.add_argument("--out", default=str(HERE / "results"), help="where compare_{setting}.{md,json,png} go")
    args = parser.parse_args()
    try:
        require_plots("compare.py (compare_{setting}.png)")
    except PlotsUnavailableError as err:
        sys.exit(f"compare.py: {err}")
    context_size = args.context_size or (4 if args.setting == "hard" else 2)
    started = time.time()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(work, args.train_docs, args.setting)
    rows = []
    for arch in ARCHS:
        rows.append(evaluate(work, data, arch, 0 if arch == "transformer" else context_size, args.updates,
                             args.batch_size))
        print(json.dumps(rows[-1]), flush=True)
        (out / f"compare_{args.setting}.json").write_text(json.dumps(rows, indent=2))
        write_results(rows, args, out / f"compare_{args.setting}.md", started)
        plot(rows, out / f"compare_{args.setting}.png")


if __name__ == "__main__":
    main()
