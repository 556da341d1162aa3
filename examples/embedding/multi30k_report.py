"""Results of the Multi30k embedding recipe: multi30k_embedding.{md,json} and the xsim error plot (.png).

Li (2021), ch. 4 expects two directions, stated here with whether they held on this run: the distance
constraint lowers the retrieval error (cT-MDE below T-MDE) and the bottleneck beats full attention
(T-MDE below T-MDE_F). Errors are xsim as LASER computes it (ratio margin, textual error).
"""
import datetime
import json
import logging
import os
from typing import Dict, List, Optional, Sequence

from devtools.machine_facts import MachineFacts, this_machine

# (better model, worse model, claim) — "better" means a lower mean xsim error.
EXPECTED = (("ct_mde", "tmde", "the distance constraint lowers the error (cT-MDE better than T-MDE)"),
            ("tmde", "tmde_f", "the bottleneck beats full attention (T-MDE better than T-MDE_F)"))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def summaries(rows: List[dict], models: Sequence[str], unseen: Sequence[str]) -> Dict[str, dict]:
    """Mean error over all directions and over the directions of the pair never seen in training."""
    out = {}
    for name in models:
        mine = [r for r in rows if r["model"] == name]
        out[name] = {"mean_error_percent": mean([r["error_percent"] for r in mine]),
                     "unseen_pair_error_percent": mean([r["error_percent"] for r in mine
                                                        if {r["src"], r["tgt"]} == set(unseen)])}
    return out


def expected_directions(summary: Dict[str, dict]) -> List[dict]:
    checks = []
    for better, worse, claim in EXPECTED:
        held: Optional[bool] = None
        held_unseen: Optional[bool] = None
        if better in summary and worse in summary:
            held = summary[better]["mean_error_percent"] < summary[worse]["mean_error_percent"]
            held_unseen = summary[better]["unseen_pair_error_percent"] < summary[worse]["unseen_pair_error_percent"]
        checks.append({"claim": claim, "better": better, "worse": worse, "held": held,
                        "held_on_unseen_pair": held_unseen})
    return checks


def markdown(report: dict, labels: Dict[str, str]) -> str:
    m, t = report["machine"], report["wall_time_s"]
    lines = ["# Multi30k multilingual embedding (Li 2021, ch. 4)", "",
             f"- Date: {report['date']}",
             f"- Machine: {MachineFacts(**m).describe()}",
             f"- Data: Multi30k task 1 (Elliott et al., 2016), train {report['lines']['train']}, "
             f"val {report['lines']['valid']}, test_2016_flickr {report['lines']['test']} lines per language; "
             f"joint sentencepiece BPE ({report['settings']['bpe_vocab']}) over en/de/fr/cs",
             f"- Training pairs: {', '.join(report['train_pairs'])} (pivots en, de); model size "
             f"`{report['settings']['size']}`",
             f"- xsim: ratio margin, k={report['settings']['k']}, textual error (duplicate sentences count as right)",
             f"- Wall time: preprocessing {t['prepare']:.0f} s, evaluation {t['evaluate']:.0f} s, "
             f"total {t['total']:.0f} s", f"- Command: `{report['command']}`", "",
             "| model | updates | training wall time | training CPU time | wall s per update (incl. validation) | mean xsim error % "
             "| fr↔cs error % (unseen pair) |", "|---|---|---|---|---|---|---|"]
    for name, run in report["models"].items():
        s = report["summary"][name]
        lines.append(f"| {labels[name]} | {run['updates']} | {run['wall_time_s']:.0f} s | {run['cpu_time_s']:.0f} s | "
                     f"{run['wall_time_s'] / run['updates']:.2f} | {s['mean_error_percent']:.2f} | "
                     f"{s['unseen_pair_error_percent']:.2f} |")
    lines += ["", "Expected directions (mean error over the 12 directions; in brackets, fr↔cs alone):", ""]
    verdicts = {True: "held", False: "did NOT hold", None: "not tested (model not run)"}
    for check in report["expected"]:
        unseen = "" if check["held"] is None else f" (fr↔cs: {verdicts[check['held_on_unseen_pair']]})"
        lines.append(f"- {check['claim']}: **{verdicts[check['held']]}**{unseen}")
    lines += ["", "xsim error % per pair (→: first language retrieves the second; ←: the reverse):", "",
              "| model | pair | seen in training | error % → | error % ← |", "|---|---|---|---|---|"]
    for name in report["models"]:
        mine = [r for r in report["rows"] if r["model"] == name]
        for forward, backward in zip(mine[::2], mine[1::2]):
            lines.append(f"| {labels[name]} | {forward['src']}-{forward['tgt']} | "
                         f"{'yes' if forward['seen_in_training'] else 'no'} | {forward['error_percent']:.2f} | "
                         f"{backward['error_percent']:.2f} |")
    lines += ["", "Training commands:", ""]
    lines += [f"- {name}: `{run['command']}`" for name, run in report["models"].items()]
    return "\n".join(lines) + "\n"


def plot(path: str, rows: List[dict], labels: Dict[str, str]) -> bool:
    """Grouped bars: xsim error per direction, one bar per model. False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.warning("matplotlib is not installed (pip install -e '.[plots]'): no plot written")
        return False
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    directions = list(dict.fromkeys(f"{r['src']}→{r['tgt']}" for r in rows))
    width = 0.8 / len(labels)
    figure, axes = plt.subplots(figsize=(max(8, len(directions)), 4.5))
    for i, (name, label) in enumerate(labels.items()):
        errors = {f"{r['src']}→{r['tgt']}": r["error_percent"] for r in rows if r["model"] == name}
        axes.bar([d + i * width for d in range(len(directions))], [errors[d] for d in directions], width, label=label)
    axes.set_xticks([d + 0.4 - width / 2 for d in range(len(directions))], directions)
    axes.set_ylabel("xsim error % (ratio margin, k=4)")
    axes.set_title("Multi30k test_2016_flickr retrieval error per direction (fr↔cs never seen in training)")
    axes.set_ylim(0, 100)
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write_results(out_dir: str, rows: List[dict], runs: Dict[str, dict], labels: Dict[str, str],
                  lines: Dict[str, int], prepare_s: float, evaluate_s: float, command: str, settings: dict,
                  train_pairs: Sequence[str], unseen: Sequence[str]) -> dict:
    """Write multi30k_embedding.{md,json,png} into ``out_dir``; returns the JSON report."""
    os.makedirs(out_dir, exist_ok=True)
    summary = summaries(rows, list(runs), unseen)
    train_s = sum(run["wall_time_s"] for run in runs.values())
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": this_machine().as_dict(), "command": command, "lines": lines, "train_pairs": list(train_pairs),
        "settings": {key: settings[key] for key in ("size", "updates", "bpe_vocab", "k", "seed", "threads")},
        "wall_time_s": {"prepare": prepare_s, "train": train_s, "evaluate": evaluate_s,
                        "total": prepare_s + train_s + evaluate_s},
        "models": {name: {"label": labels[name], "updates": run["updates"], "size": run["size"],
                          "wall_time_s": run["wall_time_s"], "cpu_time_s": run["cpu_time_s"], "command": run["command"]} for name, run in runs.items()},
        "summary": summary, "expected": expected_directions(summary), "rows": rows,
    }
    base = os.path.join(out_dir, "multi30k_embedding")
    with open(base + ".json", "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2, ensure_ascii=False)
    with open(base + ".md", "w", encoding="utf-8") as handle:
        handle.write(markdown(report, labels))
    plot(base + ".png", rows, labels)
    print(markdown(report, labels))
    return report
