"""Results of the Multi30k embedding recipe: ``multi30k_embedding.md`` and ``.json``, the retrieval
errors of every direction as plain text (``multi30k_embedding.errors.tsv``: the error count and
the rows wrongly retrieved) and the xsim error plot (``.png``, where matplotlib is installed).

Over seeds every number is mean ± sd, and the expected directions of Li (2021), ch. 4 are tested
with a paired t-test over the seeds (a seed's two models share initialisation and batch order):
the distance constraint lowers the retrieval error (cT-MDE below T-MDE) and the bottleneck beats
full attention (T-MDE below T-MDE_F). Errors are xsim as LASER computes it (ratio margin, textual
error)."""
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from devtools.recipe_report import EARLIER_TIMES, RunHeader, plot_if_possible, unfinished_lines
from devtools.seed_statistics import direction_verdict, format_mean_sd, mean_sd, t_test

STEM = "multi30k_embedding"
# (better model, worse model, claim) — "better" means a lower mean xsim error.
EXPECTED = (("ct_mde", "tmde", "the distance constraint lowers the error (cT-MDE better than T-MDE)"),
            ("tmde", "tmde_f", "the bottleneck beats full attention (T-MDE better than T-MDE_F)"))
MEASURES = {"mean_error_percent": "over the 12 directions", "unseen_pair_error_percent": "on the unseen pair"}


def summaries(rows: Sequence[dict], test_set: str, unseen: Sequence[str]) -> Dict[str, Dict[str, Dict[int, float]]]:
    """{model: {measure: {seed: value}}}: the mean error over the 12 directions of ``test_set``,
    and over the two directions of the pair never seen in training."""
    out: Dict[str, Dict[str, Dict[int, float]]] = {}
    for row in rows:
        if row["test_set"] == test_set:
            model = out.setdefault(row["model"], {measure: {} for measure in MEASURES})
            model["mean_error_percent"].setdefault(row["seed"], []).append(row["error_percent"])
            if {row["src"], row["tgt"]} == set(unseen):
                model["unseen_pair_error_percent"].setdefault(row["seed"], []).append(row["error_percent"])
    return {model: {measure: {seed: sum(v) / len(v) for seed, v in by_seed.items()}
                    for measure, by_seed in measures.items()} for model, measures in out.items()}


def expected_directions(summary: Dict[str, Dict[str, Dict[int, float]]]) -> List[dict]:
    """Per claim and measure: the difference worse − better per seed both models have (positive:
    as expected), its mean ± sd, the paired t-test's p and the verdict."""
    checks = []
    for better, worse, claim in EXPECTED:
        check = {"claim": claim, "better": better, "worse": worse}
        for measure in MEASURES:
            if better not in summary or worse not in summary:
                check[measure] = {"verdict": "not tested (model not run)"}
                continue
            seeds = sorted(set(summary[better][measure]) & set(summary[worse][measure]))
            test = t_test([summary[worse][measure][s] - summary[better][measure][s] for s in seeds])
            check[measure] = {"seeds": seeds, "differences": list(test.differences), "mean": test.mean, "sd": test.sd,
                              "p": test.p, "verdict": direction_verdict(test.mean, test.p), "text": test.describe()}
        checks.append(check)
    return checks


def direction_values(rows: Sequence[dict], test_set: str) -> Dict[tuple, List[float]]:
    """{(model, src, tgt): [error % per seed]} of one test set, in row order."""
    out: Dict[tuple, List[float]] = {}
    for row in rows:
        if row["test_set"] == test_set:
            out.setdefault((row["model"], row["src"], row["tgt"]), []).append(row["error_percent"])
    return out


def errors_tsv(rows: Sequence[dict]) -> str:
    """One line per model, seed, test set and direction: its errors, and every wrong retrieval as
    ``query>retrieved`` (0-based line numbers of the query's and the retrieved file)."""
    lines = ["model\tseed\ttest_set\tsrc\ttgt\terrors\ttotal\twrong (query>retrieved, 0-based lines)"]
    lines += [f"{r['model']}\t{r['seed']}\t{r['test_set']}\t{r['src']}\t{r['tgt']}\t{r['errors']}\t{r['total']}\t"
              + " ".join(f"{i}>{j}" for i, j in r["wrong"]) for r in rows]
    return "\n".join(lines) + "\n"


RetrievalKey = Tuple[str, int, str, str, str]  # model, seed, test set, source and target language


def read_errors_tsv(path: Path) -> Dict[RetrievalKey, Tuple[int, List[List[int]]]]:
    """What :func:`errors_tsv` wrote: {(model, seed, test set, src, tgt): (total, wrong retrievals)},
    each line's count checked against its list. Raises ``ValueError`` naming the line."""
    kept: Dict[RetrievalKey, Tuple[int, List[List[int]]]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        try:
            model, seed, test_set, src, tgt, errors, total, wrong = fields
            pairs = [[int(i) for i in pair.split(">")] for pair in wrong.split()]
            if len(pairs) != int(errors) or any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"{errors} errors but {len(pairs)} wrong retrievals listed")
            kept[(model, int(seed), test_set, src, tgt)] = (int(total), pairs)
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: not a line errors_tsv writes ({error})") from None
    return kept


def run_lines(report: dict) -> List[str]:
    lines = ["| model | seed | updates | stopped | training wall / CPU time | tested checkpoint | mean xsim error % "
             "| fr↔cs error % (unseen pair) |", "|---|---|---|---|---|---|---|---|"]
    for name, by_seed in report["runs"].items():
        for seed, run in by_seed.items():
            s = report["summary"][name]
            lines.append(f"| {report['labels'][name]} | {seed} | {run['updates']} | {run.get('stopped', 'fixed')} | "
                         f"{run['wall_time_s']:.0f} s / {run['cpu_time_s']:.0f} s | "
                         f"{run.get('checkpoint', 'checkpoint_last.pt')} | "
                         f"{s['mean_error_percent'][seed]:.2f} | {s['unseen_pair_error_percent'][seed]:.2f} |")
    return lines


def earlier_lines(earlier: Optional[dict]) -> List[str]:
    """The paragraph naming the runs taken from an earlier results folder, and how it was made."""
    if not earlier:
        return []
    return [f"Runs reported from an earlier results folder (`--earlier-results {earlier['folder']}`; their work "
            f"directory is gone, their errors are recounted from its `{STEM}.errors.tsv`): "
            f"{', '.join(run.replace('/seed', ', seed ') for run in earlier['runs'])}. That folder was written "
            f"{earlier['date']} on {earlier['machine']}, by `{earlier['command']}`; {EARLIER_TIMES}.", ""]


def markdown(report: dict, header: RunHeader) -> str:
    t, settings = report["wall_time_s"], report["settings"]
    lines = ["# Multi30k multilingual embedding (Li 2021, ch. 4)", "", *header.lines(),
             f"- Data: Multi30k task 1 (Elliott et al., 2016), train {report['lines']['train']}, "
             f"val {report['lines']['valid']}, {report['test_set']} {report['lines']['test']} lines per language; "
             f"joint sentencepiece BPE ({settings['bpe_vocab']}) over en/de/fr/cs",
             f"- Training pairs: {', '.join(report['train_pairs'])} (pivots en, de); model size `{settings['size']}`",
             f"- xsim: ratio margin, k={settings['k']}, textual error (duplicate sentences count as right)",
             f"- Wall time: preprocessing {t['prepare']:.0f} s, training {t['train']:.0f} s (sum over runs), "
             f"evaluation {t['evaluate']:.0f} s", "", *earlier_lines(report.get("earlier_results")),
             "## Runs", "", *run_lines(report), "",
             f"## Over seeds ({report['test_set']})", "",
             "| model | seeds | mean xsim error % (mean ± sd) | fr↔cs error % (mean ± sd) |", "|---|---|---|---|"]
    for name, s in report["summary"].items():
        lines.append(f"| {report['labels'][name]} | {len(s['mean_error_percent'])} | "
                     f"{format_mean_sd(list(s['mean_error_percent'].values()))} | "
                     f"{format_mean_sd(list(s['unseen_pair_error_percent'].values()))} |")
    lines += ["", "Expected directions: difference worse − better model per seed (positive: as expected), "
              "mean ± sd, and the verdict:", ""]
    for check in report["expected"]:
        parts = [f"{where}: **{check[measure]['verdict']}**"
                 + (f" ({check[measure]['text']})" if "text" in check[measure] else "")
                 for measure, where in MEASURES.items()]
        lines.append(f"- {check['claim']}: " + "; ".join(parts))
    for test_set in [report["test_set"], *[t["name"] for t in report["extra_tests"]]]:
        lines += ["", f"## xsim error % per direction, {test_set} (mean ± sd over seeds)", "",
                  "| model | direction | seen in training | error % |", "|---|---|---|---|"]
        seen = {(r["src"], r["tgt"]): r["seen_in_training"] for r in report["rows"]}
        for (name, src, tgt), values in direction_values(report["rows"], test_set).items():
            lines.append(f"| {report['labels'][name]} | {src}→{tgt} | {'yes' if seen[(src, tgt)] else 'no'} | "
                         f"{format_mean_sd(values)} |")
    lines += ["", "## Convergence", ""]
    for name, by_seed in report["runs"].items():
        for seed, run in by_seed.items():
            curve = ", ".join(f"{u}: {e:.2f}" for u, e in run.get("curve", []))
            lines.append(f"- {report['labels'][name]}, seed {seed}: "
                         f"{run.get('convergence', 'fixed budget, not judged')}"
                         + (f". Validation error % by update: {curve}" if curve else ""))
    lines += ["", *unfinished_lines(report["unfinished"])]
    lines += ["", f"Retrieval errors of every direction (errors and wrongly retrieved lines): `{STEM}.errors.tsv`.", "",
              "Training commands (the last training session of each run):", ""]
    lines += [f"- {name}, seed {seed}: `{run['command']}`" for name, by_seed in report["runs"].items()
              for seed, run in by_seed.items()]
    return "\n".join(lines) + "\n"


def plot(path: Path, report: dict) -> None:
    """Grouped bars: xsim error per direction of the Multi30k test, one bar per model (mean over
    seeds, sd as the error bar)."""
    from fairseq_ctx.core.plots import pyplot

    plt = pyplot()

    values = direction_values(report["rows"], report["test_set"])
    directions = list(dict.fromkeys(f"{src}→{tgt}" for _, src, tgt in values))
    labels = report["labels"]
    width = 0.8 / max(len(labels), 1)
    figure, axes = plt.subplots(figsize=(max(8, len(directions)), 4.5))
    top = 0.0
    for i, (name, label) in enumerate(labels.items()):
        mine = {f"{src}→{tgt}": v for (model, src, tgt), v in values.items() if model == name}
        means, sds = zip(*(mean_sd(mine[d]) for d in directions))
        axes.bar([d + i * width for d in range(len(directions))], means, width, yerr=[sd or 0.0 for sd in sds],
                 label=label)
        top = max(top, *(mean + (sd or 0.0) for mean, sd in zip(means, sds)))
    axes.set_xticks([d + 0.4 - width / 2 for d in range(len(directions))], directions)
    axes.set_ylabel("xsim error % (ratio margin, k=4)")
    axes.set_title(f"Multi30k {report['test_set']} retrieval error per direction (fr↔cs never seen in training)")
    axes.set_ylim(0, min(100.0, max(1.0, 1.15 * top)))  # the bars' own scale: errors of 1–3% stay readable
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_results(out_dir: Path, header: RunHeader, facts: dict) -> dict:
    """Write ``multi30k_embedding.{md,json,errors.tsv,png}`` into ``out_dir``; returns the JSON report.
    ``facts``: rows, runs ({model: {seed: run.json}}), labels, lines, prepare_s, evaluate_s,
    settings, train_pairs, unseen, test_set, extra_tests, unfinished, earlier_results (None, or the
    earlier results folder whose runs are reported)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summaries(facts["rows"], facts["test_set"], facts["unseen"])
    runs = facts["runs"]
    train_s = sum(run["wall_time_s"] for by_seed in runs.values() for run in by_seed.values())
    report = {
        **header.as_dict(),
        **{key: facts[key] for key in ("lines", "settings", "test_set", "extra_tests", "unfinished", "labels",
                                       "earlier_results")},
        "train_pairs": list(facts["train_pairs"]),
        "wall_time_s": {"prepare": facts["prepare_s"], "train": train_s, "evaluate": facts["evaluate_s"],
                        "total": facts["prepare_s"] + train_s + facts["evaluate_s"]},
        "runs": runs, "summary": summary, "expected": expected_directions(summary),
        "rows": [{key: value for key, value in row.items() if key != "wrong"} for row in facts["rows"]],
    }
    base = out_dir / STEM
    text = markdown(report, header)
    base.with_suffix(".json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    base.with_suffix(".md").write_text(text, encoding="utf-8")
    Path(f"{base}.errors.tsv").write_text(errors_tsv(facts["rows"]), encoding="utf-8")
    plot_if_possible(lambda: plot(base.with_suffix(".png"), report), base.with_suffix(".png"))
    print(text)
    return report
