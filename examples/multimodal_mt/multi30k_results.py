"""Results of multi30k_multisource.py: ``multi30k_multisource.{json,md,png}`` and, next to them,
``hypotheses/<model>.seed<N>.<test set>.de`` (and ``….shuffled.de``, decoded with the second source
shuffled), the plain-text translations every score of the tables is computed from. One section
per test set; with several seeds, mean ± sd over seeds and two tests of each model's difference
from text-only. A resumed or partial run is reported as it stands, its unfinished models listed
with the command that resumes each."""
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from devtools.recipe_report import plot_if_possible, unfinished_lines
from devtools.seed_statistics import (HELD, NOT_HELD, SIGNIFICANCE, UNDECIDED, UNTESTED, direction_verdict,
                                      mean_sd_text, power_note)
from examples.multimodal_mt.multi30k_evaluation import (best_validation, compare, comparison_cells, comparison_header, convergence_lines,
                                 convergence_rows, left_out_lines, over_seeds, p_text, read_lines, recompute_note,
                                 score_decoded)
from examples.multimodal_mt.multi30k_averaging import export_curve_hypotheses
from examples.multimodal_mt.multi30k_earlier import EarlierResults, EarlierRun, earlier_lines, score_earlier
from examples.multimodal_mt.multi30k_runs import ModelRun, RunTable

ORDER = ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]
BASELINE = "text-only"
STEM = "multi30k_multisource"
SUMMARY = f"{STEM}.json"
EXPECTED = ("Expected direction (Libovický, 2019, Europarl multi-source: +3 to +4 BLEU over a single "
            "source): every multi-source model above the text-only en→de model.")


def score_test_set(runs: Sequence[ModelRun], stem: str, reference: str, out_dir: Path,
                   earlier: Sequence[EarlierRun] = ()) -> List[dict]:
    """One row per model decoded on ``stem``: its scores per seed (from the hypotheses written to
    ``out_dir/hypotheses``; of ``earlier`` runs: from their kept hypotheses), mean ± sd over seeds,
    and its comparison with text-only."""
    references = read_lines(Path(reference))
    scores, hypotheses = score_decoded(runs, stem, reference, out_dir)
    score_earlier(earlier, stem, references, out_dir, scores, hypotheses)
    scores = {name: dict(sorted(per_seed.items())) for name, per_seed in scores.items()}
    rows = []
    for model_run in [*runs, *earlier]:
        if model_run.name in scores and model_run.name not in [row["name"] for row in rows]:
            model = model_run.model
            rows.append({"name": model_run.name, "strategy": model.strategy, "second_source": model.extra,
                         "pair": model.pair, **over_seeds(scores[model_run.name])})
    rows.sort(key=lambda r: (r["second_source"] or "", ORDER.index(r["strategy"])))
    for row in rows:
        if BASELINE in scores and row["name"] != BASELINE:
            row["vs_text_only"] = compare(scores[BASELINE], row["per_seed"], hypotheses[BASELINE],
                                          hypotheses[row["name"]], references)
    return rows


def direction(rows: List[dict]) -> str:
    """Held / undecided / did not hold for each multi-source model (its comparison's verdict), as one statement."""
    multi = [r for r in rows if r["second_source"] is not None and r.get("vs_text_only", {}).get("seeds")]
    if not any(r["name"] == BASELINE for r in rows) or not multi:
        return "Not judged: the run has no text-only model or no multi-source model with a common seed."
    groups: Dict[str, List[str]] = {HELD: [], UNDECIDED: [], NOT_HELD: []}
    for row in multi:
        versus = row["vs_text_only"]
        groups[versus["verdict"]].append(f"{row['name']} ({versus['delta_bleu']['mean']:+.2f}, "
                                         f"p {p_text(versus['verdict_p'])})")
    if len(groups[HELD]) == len(multi):
        which = "the multi-source model" if len(multi) == 1 else f"all {len(multi)} multi-source models"
        return f"Held for {which}: " + ", ".join(groups[HELD]) + "."
    parts = [f"Held for {len(groups[HELD])} of {len(multi)} multi-source models" +
             (": " + ", ".join(groups[HELD]) if groups[HELD] else "")]
    if groups[UNDECIDED]:
        parts.append(f"undecided (p ≥ {SIGNIFICANCE} or no difference) for " + ", ".join(groups[UNDECIDED]))
    if groups[NOT_HELD]:
        parts.append(f"did not hold (below text-only, p < {SIGNIFICANCE}) for " + ", ".join(groups[NOT_HELD]))
    return "; ".join(parts) + "."


def convergence(rows: List[dict]) -> str:
    """The convergence rule's outcome on the text-only validation curve (its first seed among
    ``rows``, each with ``second_source``, ``seed`` and ``plateau``), in words."""
    base = next((r for r in rows if r["second_source"] is None), None)
    if base is None:
        return "not judged: the run has no text-only model"
    return f"text-only (seed {base['seed']}): {base['plateau']['text']}"


def length_check(row: dict, base: Optional[dict]) -> str:
    """Whether a BLEU gain over text-only remains at equal length: BLEU without its brevity penalty
    (the n-gram precisions, which a longer output does not raise), for a model longer than text-only.
    A BP-free difference above zero is judged by the verdict's rule (``direction_verdict`` on the
    paired t-test over seeds; one seed: its sign, marked untested)."""
    versus = row.get("vs_text_only")
    if base is None or not versus or not versus.get("seeds"):
        return "—"
    if versus["delta_bleu"]["mean"] <= 0:
        return "no gain to check"
    if row["ratio"]["mean"] < base["ratio"]["mean"]:
        return "not checked: shorter than text-only (BLEU without BP would favour it)"
    delta, p = versus["delta_bleu_no_bp"]["mean"], versus["t_bleu_no_bp"]["p"]
    if delta <= 0:
        return "no: without BP it is not above text-only (the gain may come from length)"
    if direction_verdict(delta, p) == UNDECIDED:
        return f"undecided: above text-only without BP, p {p_text(p)} (the gain may come from length)"
    return "yes: the gain remains without BP " + (UNTESTED if p is None else f"(p {p_text(p)})")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def test_set_section(stem: str, rows: List[dict], reference: str, sentences: int) -> List[str]:
    base = next((r for r in rows if r["name"] == BASELINE), None)
    lines = [f"## Test set {stem} ({sentences} sentences)", "",
             f"| model | pair | seeds | {comparison_header('text-only', 'verdict')} | BLEU, 2nd source shuffled | drop |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        shuffled = (f"{mean_sd_text(row['bleu_shuffled'])} | {mean_sd_text(row['bleu_drop'], sign=True)}"
                    if "bleu_shuffled" in row else "n/a | n/a")
        lines.append(f"| {row['name']} | {row['pair']} | {','.join(map(str, row['seeds']))} | "
                     f"{comparison_cells(row, row.get('vs_text_only'))} | {shuffled} |")
    tests = sorted({r["vs_text_only"]["test"] for r in rows if r.get("vs_text_only", {}).get("seeds")})
    lines += ["", f"{EXPECTED} **{direction(rows)}**" + (f" (p of the verdict: {'; '.join(tests)}.)" if tests else ""), "",
              "Length: ratio = hypothesis / reference length (sacreBLEU's, in BLEU's tokens); BLEU without BP = "
              "BLEU / BP, the geometric mean of the n-gram precisions. Removing the brevity penalty takes away the "
              "reward an output gets for not being shorter than the reference and leaves the precisions, which do "
              "not rise with length; so for a model longer than text-only a gain that remains without BP is not a "
              "length effect (for a model shorter than text-only this check would favour it and is not made).", "",
              "| model | length ratio | BLEU without BP | Δ BLEU without BP vs text-only | gain at equal length |",
              "|---|---|---|---|---|"]
    for row in rows:
        versus = row.get("vs_text_only") or {}
        delta = mean_sd_text(versus["delta_bleu_no_bp"], sign=True) if versus.get("seeds") else "—"
        lines.append(f"| {row['name']} | {row['ratio']['mean']:.3f} | {mean_sd_text(row['bleu_no_bp'])} | {delta} | "
                     f"{length_check(row, base)} |")
    lines += ["", "Per seed:", "",
              "| model | seed | BLEU | chrF | length ratio | BP | BLEU without BP | BLEU, 2nd source shuffled | "
              "best val BLEU @ update | train min | eval min | hypotheses |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for seed, s in sorted(row["per_seed"].items()):
            shuffled = f"{s['bleu_shuffled']:.2f}" if "bleu_shuffled" in s else "n/a"
            lines.append(f"| {row['name']} | {seed} | {s['bleu']:.2f} | {s['chrf']:.2f} | {s['ratio']:.3f} | {s['bp']:.3f} | "
                         f"{s['bleu_no_bp']:.2f} | {shuffled} | {best_validation(s['valid_bleu'])} | "
                         f"{_minutes(s['train_wall_s'])} | {_minutes(s['eval_wall_s'])} | {s['hypotheses']} |")
    lines += ["", *recompute_note(rows, stem, reference, BASELINE), ""]
    return lines


def budget_lines(runs: Sequence[ModelRun]) -> List[str]:
    """The "Test score by budget" section of the runs with a test curve (``--test-curve``)."""
    rows = [(r, stem, point) for r in runs for stem, points in (r.record().get("test_curve") or {}).items()
            for point in points]
    if not rows:
        return []
    window = rows[0][0].record()["settings"]["average_last"]
    lines = ["## Test score by budget", "",
             f"Each row is the test set decoded with the average of the {window} epoch checkpoints ending at that update "
             "(`--test-curve`; the same averages as the validation curve): the model that a run of that many updates "
             "tests, because the schedule does not depend on --max-update (inverse_sqrt, the same epochs), so a "
             "shorter run is this run's beginning. A description of the budget, not a choice of model: the tested "
             "model of this run is its last row.", "",
             "| model | seed | test set | update (epoch) | BLEU | chrF | BP | length ratio | BLEU without BP | hypotheses |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for model_run, stem, point in sorted(rows, key=lambda row: (row[0].name, row[0].seed, row[2]["updates"])):
        name = f"hypotheses/{model_run.name}.seed{model_run.seed}.{stem}.average_to_epoch{point['epoch']}.de"
        lines.append(f"| {model_run.name} | {model_run.seed} | {stem} | {point['updates']} ({point['epoch']}) | "
                     f"{point['bleu']:.2f} | {point['chrf']:.2f} | {point['bp']:.3f} | {point['ratio']:.3f} | "
                     f"{point['bleu_no_bp']:.2f} | {name} |")
    return [*lines, ""]


def markdown(run: dict, sections: Dict[str, List[dict]], references: Dict[str, str], table: RunTable,
             convergence_rows: List[dict], earlier: Optional[EarlierResults] = None) -> str:
    first = next(iter(sections.values()), [])
    pairs = ", ".join(sorted({r["pair"] for rows in sections.values() for r in rows if r["second_source"]})) or "none in this run"
    header, sentences = run["header"], run["sentences"]
    lines = [
        f"# Multi30k: a second source language ({pairs}) against text-only en→de", "", *header.lines(),
        f"- Data: Multi30k task 1 (Elliott et al., 2016), lc.norm.tok files, {sentences['train']}/{sentences['val']} "
        "sentences (train / val); test sets: " + ", ".join(f"{s} ({sentences[s]})" for s in run["test_sets"]),
        f"- Settings (the same for every model and seed): {json.dumps(run['settings'])}", "",
        "BLEU and chrF: sacreBLEU on each test set, beam search from the tested model (the budget above says which); "
        "hypotheses with the sentencepiece pieces removed (lowercased, Moses-tokenised text) against the "
        "lc.norm.tok references with `--tokenize none`, the form in which papers report Multi30k BLEU. \"shuffled\": "
        "the same model re-decoded with the second source permuted across the test set (as fairseq-ctx-adversarial "
        "does); drop = BLEU − BLEU shuffled. With several seeds: mean ± sd (sample sd) over seeds.", "",
        "Tests of a difference from text-only (each model against text-only of the model's own seeds, while "
        "text-only's row gives the mean over all its seeds): (1) the paired t-test over seeds of the per-seed "
        "differences, which "
        "measures the difference against seed-to-seed variation (would another training run give the gain?); the "
        "verdict uses it with two or more seeds. (2) sacreBLEU's paired bootstrap resampling of the test sentences "
        "(Koehn, 2004; `--paired-bs`, 1000 resamples, seed 12345) with the seeds' hypotheses pooled, which treats "
        "the trained models as fixed and measures only the sampling of test sentences; the verdict uses it with one "
        "seed. " + power_note(len(header.seeds)), "", *earlier_lines(earlier)]
    for stem, rows in sections.items():
        lines += test_set_section(stem, rows, references[stem], sentences[stem])
    lines += budget_lines([*table.trained, *([] if earlier is None else earlier.runs)])
    lines += [*convergence_lines(convergence_rows, f"Rule: {header.convergence_rule}. Outcome: {header.convergence}."),
              *left_out_lines(table.left_out), "", *unfinished_lines(table.unfinished)]
    total = sum(s["train_wall_s"] + s["eval_wall_s"] for row in first for s in row["per_seed"].values())
    lines += ["", f"Wall time: {_minutes(total)} min for {sum(len(r['per_seed']) for r in first)} model run(s) "
              f"(training with validation, then decoding the first test set; an interrupted training counts each "
              f"of its stretches, up to its last logged line); "
              f"this invocation {_minutes(run['this_invocation_wall_s'])} min.", "",
              f"Plot: {STEM}.png (first test set: mean test BLEU per model with its sd over seeds, text-only as the "
              f"reference line; validation BLEU per update, one line per seed). Per-model commands: {STEM}.json. "
              f"Each point of a curve of averaged checkpoints is scored from "
              f"hypotheses/<model>.seed<N>.val.average_to_epoch<E>.de against val.lc.norm.tok.de with the "
              f"sacreBLEU command above."]
    return "\n".join(lines) + "\n"


def plot(rows: List[dict], convergence_rows: List[dict], path: Path) -> None:
    """Mean test BLEU per model over seeds (text-only as a line) and the validation curves."""
    from fairseq_ctx.core.plots import pyplot

    plt = pyplot()

    figure, (bars, curves) = plt.subplots(1, 2, figsize=(12, 4.5))
    multi = [r for r in rows if r["second_source"]]
    bars.bar(range(len(multi)), [r["bleu"]["mean"] for r in multi],
             yerr=[r["bleu"]["sd"] or 0.0 for r in multi], capsize=3)
    base = next((r for r in rows if r["second_source"] is None), None)
    if base is not None:
        bars.axhline(base["bleu"]["mean"], color="black", linestyle="--",
                     label=f"text-only en→de ({base['bleu']['mean']:.1f})")
        bars.legend(fontsize=8)
    bars.set_xticks(range(len(multi)))
    bars.set_xticklabels([r["name"] for r in multi], rotation=20)
    bars.set_ylabel("test BLEU (mean over seeds)")
    colours = plt.get_cmap("tab20")
    names = list(dict.fromkeys(row["name"] for row in convergence_rows))
    for row in convergence_rows:
        if row["valid_bleu"]:
            updates, bleu = zip(*row["valid_bleu"])
            first = row is next(r for r in convergence_rows if r["name"] == row["name"])
            curves.plot(updates, bleu, marker=".", color=colours(names.index(row["name"]) % 20),
                        label=row["name"] if first else None,
                        linestyle="--" if row["second_source"] is None else "-")
    curves.set_xlabel("updates")
    curves.set_ylabel("validation BLEU")
    if curves.get_legend_handles_labels()[0]:  # a table written before any run has a curve has no legend
        curves.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run_order(row: dict) -> tuple:
    return row["second_source"] or "", ORDER.index(row["strategy"]), row["seed"]


def write_results(table: RunTable, out_dir: Path, run: dict, references: Dict[str, str],
                  earlier: Optional[EarlierResults] = None) -> List[Path]:
    """Write ``multi30k_multisource.{json,md,png}`` and ``hypotheses/`` into ``out_dir``, with the
    runs of ``earlier`` next to those of ``table``; returns the paths of the tables (and of the
    plot when matplotlib is installed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = [] if earlier is None else earlier.runs
    sections = {stem: score_test_set(table.trained, stem, references[stem], out_dir, kept)
                for stem in run["test_sets"]}
    converged = convergence_rows([*table.trained, *kept], run_order)
    header = run["header"]
    header.seeds = sorted({*header.seeds, *(r.seed for r in kept)})
    header.convergence = convergence(converged)
    paths = [out_dir / f"{STEM}.json", out_dir / f"{STEM}.md"]
    summary_json = {**header.as_dict(), **{k: v for k, v in run.items() if k != "header"}, "expected": EXPECTED,
                    "convergence_by_run": converged,
                    "test_sets": {stem: {"reference": Path(references[stem]).name, "direction": direction(rows),
                                         "models": rows} for stem, rows in sections.items()},
                    "runs": {f"{r.name}/seed{r.seed}": r.record() for r in [*table.trained, *kept]},
                    "curve_hypotheses": {**{f"{r.name}/seed{r.seed}": export_curve_hypotheses(r, out_dir)
                                            for r in table.trained},
                                         **{f"{r.name}/seed{r.seed}": r.copy_curve_hypotheses(out_dir) for r in kept}},
                    **({"earlier_results": earlier.as_dict()} if kept else {}),
                    "unfinished": table.unfinished, "left_out": table.left_out}
    paths[0].write_text(json.dumps(summary_json, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(run, sections, references, table, converged, earlier), encoding="utf-8")
    picture = out_dir / f"{STEM}.png"
    if plot_if_possible(lambda: plot(next(iter(sections.values())), converged, picture), picture):
        paths.append(picture)
    return paths
