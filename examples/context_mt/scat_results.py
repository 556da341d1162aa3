"""Results of the SCAT En→Fr recipe: ``scat_en_fr.md`` (table + run facts), ``.json`` (the rows)
and ``.png`` (contrastive accuracy and BLEU per context model, the sentence-level model as a
reference line)."""
import argparse
import json
import os
import shlex
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from devtools.machine_facts import this_machine
from fairseq_ctx.core.generate_output import read_generate_lines

SENTENCE = "sentence"  # the stage-1 sentence-level model
SENTENCE_ON_SCAT = "sentence_scat"  # stage 1 continued on the SCAT lines without context: the stage-2 control


def sentence_hypotheses(generate_output: Path, sentence_ids: Path) -> List[str]:
    """Detokenised hypotheses (``D-`` lines) of the SCAT sentences, in example order; the context
    lines of the two-line documents are translated too but not scored."""
    detokenised = read_generate_lines(str(generate_output))["D"]
    ids = [int(line) for line in sentence_ids.read_text().split()]
    missing = [i for i in ids if i not in detokenised]
    if missing:
        raise ValueError(f"{generate_output} has no D- line for {len(missing)} of the {len(ids)} SCAT sentences "
                         f"(first: line {missing[0]}); generate the whole split with --required-batch-size-multiple 1")
    return [detokenised[i] for i in ids]


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def table(rows: Sequence[Dict]) -> List[str]:
    lines = ["| model | context | updates | sentences / update | contrastive acc. (correct/total) "
             "| support context / current | BLEU | chrF | valid loss | params | train | evaluate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        support = r.get("support", {})
        by_support = " / ".join(f"{support[k]['accuracy']:.3f}" if k in support else "–" for k in ("context", "current"))
        context = ("none" if r["model"] == SENTENCE else "none (stage 2 on SCAT lines)" if r["context_size"] == 0 else
                   "1 segment (source + own target)" if r.get("target_context_size") else "1 segment (source)")
        per_update = f"{r['sentences_per_update']:.1f}" if r.get("sentences_per_update") else "–"
        valid_loss = f"{r['valid_loss'][-1][1]:.3f}" if r.get("valid_loss") else "–"
        lines.append(f"| {r['model']} | {context} | {r['updates']} | {per_update} | {r['contrastive_accuracy']:.3f} "
                     f"({r['contrastive_correct']}/{r['contrastive_total']}) | {by_support} | {r['bleu']:.2f} | "
                     f"{r['chrf']:.2f} | {valid_loss} | {r['params'] / 1e6:.2f}M | {minutes(r['train_seconds'])} | "
                     f"{minutes(r['eval_seconds'])} |")
    return lines


def observed(baseline: Dict, context_rows: Sequence[Dict]) -> str:
    """Which context models are above ``baseline`` on contrastive accuracy, as a sentence."""
    if not context_rows:
        return "No context model has finished yet."
    above = [r["model"] for r in context_rows if r["contrastive_accuracy"] > baseline["contrastive_accuracy"]]
    level = f"{baseline['model']} ({baseline['contrastive_accuracy']:.3f})"
    if len(above) == len(context_rows):
        return f"Every context model is above {level}."
    if above:
        return f"{', '.join(above)} (of {len(context_rows)}) are above {level}."
    return f"No context model is above {level}."


def split_rows(rows: Sequence[Dict]) -> Tuple[List[Dict], List[Dict]]:
    """(sentence-level rows: stage 1 and its continuation on SCAT without context, context rows)."""
    return [r for r in rows if r["context_size"] == 0], [r for r in rows if r["context_size"] > 0]


def markdown(rows: Sequence[Dict], args: argparse.Namespace, argv: Sequence[str], total_seconds: float) -> str:
    baselines, context_rows = split_rows(rows)
    lines = [
        "# SCAT En→Fr: two-stage context models (Yun 2022, ch. 3) on ambiguous pronouns",
        "",
        f"- Date: {time.strftime('%Y-%m-%d')}; machine: {this_machine().describe()}",
        f"- Command: `python examples/context_mt/scat_en_fr.py {shlex.join(argv)}`",
        f"- Model: {args.embed_dim} dims, {args.layers}+{args.layers} layers, {args.heads} heads, FFN {args.ffn_dim}, "
        f"shared embeddings, joint sentencepiece BPE {args.spm_vocab} (thesis size: 512 dims, 6+6 layers, 8 heads, "
        f"FFN 2048)",
        f"- Updates: stage 1 (sentence level, Multi30k + SCAT sentences) {args.sentence_updates}; stage 2 "
        f"{args.context_updates} per stage-2 model (SCAT with its context line, initialised from stage 1; "
        f"sentence_scat: the same lines without context); "
        f"--max-tokens {args.max_tokens}"
        + (f" (stage 2: --batch-size {args.context_batch_size} sentences per update instead)"
           if args.context_batch_size else " (context tokens included)")
        + f", lr {args.lr}, seed {args.seed}",
        f"- Wall time: total {minutes(total_seconds)} (data preparation, training and evaluation of the models "
        f"of this run; models finished in an earlier run count with their own times below)",
        "",
        *table(rows),
        "",
        "- contrastive acc.: `fairseq-ctx-contrastive --format scat` on SCAT valid (correct translation vs the",
        "  same with the marked pronoun's gender flipped; ties count as errors); the sentence-level model ignores",
        "  the context. support: accuracy where the translators marked the deciding words in the context / in the",
        "  current sentence;",
        f"- BLEU, chrF: sacreBLEU (`fairseq-ctx-score`, detokenised, 13a) of beam-{args.beam} translations of the "
        "SCAT valid sentences against their unmarked references;",
        "- evaluated checkpoint: checkpoint_last.pt (fixed budget, no selection on the evaluation set);",
        "- sentences / update: mean batch size in training (`--max-tokens` counts context tokens, so context "
        "models see fewer sentences per update unless --context-batch-size is given); valid loss: label-smoothed "
        "cross-entropy (base 2) at the last validation (stage 1: Multi30k val; stage 2: SCAT valid with its context);",
        "- train / evaluate: wall time of fairseq-train / of generate + score + contrastive.",
        "",
        "Expected direction: context models above the sentence-level model on contrastive accuracy. In this run: "
        + " ".join(observed(baseline, context_rows) for baseline in baselines),
        "",
        *convergence(rows),
        "![SCAT results](scat_en_fr.png)",
        "",
    ]
    return "\n".join(lines)


def convergence(rows: Sequence[Dict]) -> List[str]:
    """The validation-loss curve of every model that logged one (no checkpoint is selected on it)."""
    curves = [(r["model"], r["valid_loss"]) for r in rows if r.get("valid_loss")]
    if not curves:
        return []
    lines = ["Convergence: validation loss (label-smoothed cross-entropy, base 2; stage 1 on Multi30k val, "
             "stage 2 on SCAT valid) at each validation, updates: loss.", ""]
    lines += [f"- {model}: " + ", ".join(f"{updates}: {loss:.3f}" for updates, loss in curve) for model, curve in curves]
    return [*lines, ""]


def plot(rows: Sequence[Dict], destination: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    baselines, context_rows = split_rows(rows)
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for axis, (key, title) in zip(axes, (("contrastive_accuracy", "SCAT contrastive accuracy"), ("bleu", "BLEU"))):
        axis.bar([r["model"] for r in context_rows], [r[key] for r in context_rows], color="#4c72b0")
        for baseline, style in zip(baselines, ("--", "-.")):
            axis.axhline(baseline[key], color="#999999", linestyle=style, label=baseline["model"])
        if key == "contrastive_accuracy":
            axis.axhline(0.5, color="#cc4444", linestyle=":", label="chance (2 candidates)")
        axis.set_title(title)
        axis.tick_params(axis="x", rotation=45)
        axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(destination, dpi=110)
    plt.close(figure)


def write(rows: Sequence[Dict], args: argparse.Namespace, argv: Sequence[str], out: Path,
          total_seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {"date": time.strftime("%Y-%m-%d"), "machine": this_machine().as_dict(),
               "command": f"python examples/context_mt/scat_en_fr.py {shlex.join(argv)}",
               "total_seconds": round(total_seconds, 1), "rows": list(rows)}
    (out / "scat_en_fr.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / "scat_en_fr.md").write_text(markdown(rows, args, argv, total_seconds), encoding="utf-8")
    plot(rows, out / "scat_en_fr.png")
