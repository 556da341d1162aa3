"""Results of multi30k_multisource.py: ``multi30k_multisource.{json,md,png}`` from the per-model
JSON files (one per finished model, so a resumed or partial run is reported as it stands)."""
import json
from pathlib import Path
from typing import Dict, List, Optional

from devtools.machine_facts import MachineFacts

ORDER = ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]
PLATEAU_TAIL = 0.2  # the last fifth of the updates
PLATEAU_GAIN = 0.5  # BLEU
SIGNIFICANCE = 0.05  # paired bootstrap p below which a BLEU difference counts as more than chance
EXPECTED = ("Expected direction (Libovický, 2019, Europarl multi-source: +3 to +4 BLEU over a single "
            "source): every multi-source model above the text-only en→de model.")


def load_rows(model_dir: Path) -> List[dict]:
    rows = [json.loads(path.read_text()) for path in sorted(model_dir.glob("*.json"))]
    return sorted(rows, key=lambda r: (r["second_source"] or "", ORDER.index(r["strategy"])))


def text_only(rows: List[dict]) -> Optional[dict]:
    """The row of the model without a second source, if the run has one."""
    return next((r for r in rows if r["second_source"] is None), None)


def direction(rows: List[dict]) -> str:
    """Plain statement of whether every multi-source model beat the text-only model, naming the
    models above it whose BLEU gain is within chance (paired bootstrap p of 0.05 or more)."""
    base = text_only(rows)
    multi = [r for r in rows if r["second_source"] is not None]
    if base is None or not multi:
        return "Not judged: the run has no text-only model or no multi-source model."
    below = [f"{r['name']} ({r['bleu']:.2f})" for r in multi if r["bleu"] <= base["bleu"]]
    if not below:
        which = "the multi-source model is" if len(multi) == 1 else f"all {len(multi)} multi-source models are"
        verdict = f"Held: {which} above text-only ({base['bleu']:.2f} BLEU)."
    else:
        verdict = (f"Did not hold for {len(below)} of {len(multi)} models, at or below text-only "
                   f"({base['bleu']:.2f} BLEU): " + ", ".join(below) + ".")
    within_chance = [f"{r['name']} (p {r['bleu_p']:.3f})" for r in multi
                     if r["bleu"] > base["bleu"] and "bleu_p" in r and r["bleu_p"] >= SIGNIFICANCE]
    if within_chance:
        verdict += (f" The gain may be chance (paired bootstrap p ≥ {SIGNIFICANCE}) for "
                    + ", ".join(within_chance) + ".")
    return verdict


def convergence(rows: List[dict]) -> str:
    """Whether the text-only model's greedy validation BLEU has plateaued: the best value of the
    last fifth of its updates against the best before, a gain under 0.5 BLEU counting as a plateau."""
    base = text_only(rows)
    if base is None or len(base["valid_bleu"]) < 2:
        return "Plateau not judged: no text-only validation curve with two or more points."
    last = base["valid_bleu"][-1][0]
    start = last - round(PLATEAU_TAIL * last)
    before = [bleu for updates, bleu in base["valid_bleu"] if updates <= start]
    tail = [bleu for updates, bleu in base["valid_bleu"] if updates > start]
    if not before:
        return "Plateau not judged: every text-only validation lies in the last fifth of the run."
    best_before, best_tail = max(before), max(tail)
    gain = best_tail - best_before
    verdict = (f"plateaued (gain under {PLATEAU_GAIN})" if gain < PLATEAU_GAIN
               else f"still rising (gain of {PLATEAU_GAIN} or more)")
    return (f"Text-only greedy validation BLEU: best {best_before:.2f} up to update {start}, "
            f"best {best_tail:.2f} in updates {start + 1}–{last} ({gain:+.2f}): {verdict}.")


def _best_valid(row: dict) -> str:
    if not row["valid_bleu"]:
        return "n/a"
    updates, bleu = max(row["valid_bleu"], key=lambda point: point[1])
    return f"{bleu:.2f} @ {updates}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def markdown(rows: List[dict], run: dict) -> str:
    reference = text_only(rows)
    base = None if reference is None else reference["bleu"]
    total = sum(r["train_wall_s"] + r["eval_wall_s"] for r in rows)
    pairs = ", ".join(sorted({r["pair"] for r in rows if r["second_source"]})) or "none in this run"
    lines = [
        f"# Multi30k: a second source language ({pairs}) against text-only en→de",
        "",
        f"Date: {run['date']}. Machine: {MachineFacts(**run['machine']).describe()}.",
        f"Data: Multi30k task 1 (Elliott et al., 2016), lc.norm.tok files, "
        f"{run['sentences']['train']}/{run['sentences']['valid']}/{run['sentences']['test']} sentences "
        "(train / val / test_2016_flickr).",
        "",
        "Command:",
        "",
        f"    python {run['command']}",
        "",
        f"Settings (the same for every model): {json.dumps(run['settings'])}.",
        "",
        "BLEU and chrF: sacreBLEU via fairseq-ctx-score on test_2016_flickr, beam search from the checkpoint with "
        "the best greedy validation BLEU; hypotheses with the sentencepiece pieces removed (lowercased, "
        "Moses-tokenised text) against the lc.norm.tok references with `--tokenize none`, the form in which "
        "papers report Multi30k BLEU. \"shuffled\": the same model re-decoded with the second source permuted "
        "across the test set (as fairseq-ctx-adversarial does); drop = BLEU − BLEU shuffled.",
        "",
        "p: paired bootstrap resampling of the test set (Koehn, 2004; sacreBLEU's `--paired-bs`, 1000 resamples, "
        "seed 12345) against text-only, for the BLEU and the chrF difference; below 0.05 the difference is unlikely "
        "to be chance (one training run per model: seed variance is not in it).",
        "",
        "| model | pair | updates | BLEU | chrF | Δ BLEU vs text-only | p, BLEU / chrF | BLEU, 2nd source shuffled | "
        "drop | best val BLEU (greedy) @ update | train min | eval min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        delta = "—" if base is None or r["second_source"] is None else f"{r['bleu'] - base:+.2f}"
        shuffled = (f"{r['bleu_shuffled']:.2f} | {r['bleu_drop']:+.2f}" if "bleu_shuffled" in r
                    else "n/a (no second source) | n/a")
        p_values = f"{r['bleu_p']:.3f} / {r['chrf_p']:.3f}" if "bleu_p" in r else "—"
        lines.append(f"| {r['name']} | {r['pair']} | {r['updates']} | {r['bleu']:.2f} | {r['chrf']:.2f} | {delta} | "
                     f"{p_values} | {shuffled} | {_best_valid(r)} | {_minutes(r['train_wall_s'])} | {_minutes(r['eval_wall_s'])} |")
    signatures = sorted({r["bleu_signature"] for r in rows} | {r["chrf_signature"] for r in rows})
    lines += [
        "",
        f"{EXPECTED} **{direction(rows)}**",
        "",
        convergence(rows),
        "",
        f"Wall time: {_minutes(total)} min for {len(rows)} model(s) (training with validation, then test "
        f"decoding and scoring); this invocation {_minutes(run['this_invocation_wall_s'])} min.",
        "",
        "Signatures: " + "; ".join(f"`{s}`" for s in signatures),
        "",
        "Plot: multi30k_multisource.png (test BLEU per model and pair, text-only as the reference line; "
        "greedy validation BLEU per update). Per-model commands: multi30k_multisource.json.",
    ]
    return "\n".join(lines) + "\n"


def plot(rows: List[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (bars, curves) = plt.subplots(1, 2, figsize=(12, 4.5))
    strategies = [s for s in ORDER[1:] if any(r["strategy"] == s for r in rows)]
    pairs = sorted({r["second_source"] for r in rows if r["second_source"]})
    width = 0.8 / max(len(pairs), 1)
    for i, pair in enumerate(pairs):
        values = {r["strategy"]: r["bleu"] for r in rows if r["second_source"] == pair}
        xs = [k + i * width for k, s in enumerate(strategies) if s in values]
        bars.bar(xs, [values[s] for s in strategies if s in values], width, label=f"en+{pair}→de")
    base = text_only(rows)
    if base is not None:
        bars.axhline(base["bleu"], color="black", linestyle="--", label=f"text-only en→de ({base['bleu']:.1f})")
    bars.set_xticks([k + width * (len(pairs) - 1) / 2 for k in range(len(strategies))])
    bars.set_xticklabels(strategies, rotation=20)
    bars.set_ylabel("BLEU, test_2016_flickr")
    bars.legend(fontsize=8)
    colours = plt.get_cmap("tab20")
    for k, r in enumerate(rows):
        if r["valid_bleu"]:
            updates, bleu = zip(*r["valid_bleu"])
            curves.plot(updates, bleu, marker=".", label=r["name"], color=colours(k % 20),
                        linestyle="--" if r["second_source"] is None else "-")
    curves.set_xlabel("updates")
    curves.set_ylabel("validation BLEU (greedy)")
    curves.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_results(model_dir: Path, out_dir: Path, run: dict, significance: Dict[str, Dict[str, float]],
                  stem: str = "multi30k_multisource") -> List[Path]:
    """Write ``{stem}.json``, ``{stem}.md`` and ``{stem}.png`` into ``out_dir``; returns their paths.
    ``significance``: {model name: {"bleu_p", "chrf_p"}}, paired bootstrap p-values against text-only."""
    rows = [{**r, **significance.get(r["name"], {})} for r in load_rows(model_dir)]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.{ext}" for ext in ("json", "md", "png")]
    summary: Dict[str, object] = {**run, "expected": EXPECTED, "direction": direction(rows),
                                 "convergence": convergence(rows), "models": rows}
    paths[0].write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(rows, run), encoding="utf-8")
    plot(rows, paths[2])
    return paths
