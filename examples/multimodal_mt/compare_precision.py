"""Float32 against ``--amp`` (bfloat16 mixed precision on the CPU) for the same Multi30k recipe models:
test BLEU and chrF side by side with their difference, the tolerance it is judged by, and the
greedy validation BLEU curves of both precisions overlaid in one plot.

Each side is a results file of ``multi30k_multisource.py``: the run's ``multi30k_multisource.json``
(its ``models`` list) or one model's ``results/<model>.json`` of a work directory; several files
may be given per side. Only models present on both sides are compared, and both sides must have
been trained with the same settings apart from the precision (checked).

    python -m examples.multimodal_mt.compare_precision \\
        --fp32 examples/multimodal_mt/results/2000_updates/multi30k_multisource.json \\
        --amp WORK/results/text-only.json WORK/results/serial-fr.json --out DIR
"""
import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

TOLERANCE = 0.5  # BLEU: the largest |amp - fp32| test BLEU difference called "equal quality"
PRECISION_SETTINGS = ("amp", "precision", "workers", "jobs", "threads")  # may differ between the sides


def read_models(paths: Sequence[str]) -> Dict[str, dict]:
    """Model name → its result, from run-level (``models`` list) or per-model results files."""
    models: Dict[str, dict] = {}
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for model in data.get("models", [data]):
            models[model["name"]] = {**model, "settings": model.get("settings", data.get("settings", {}))}
    return models


def comparable(fp32: dict, amp: dict) -> List[str]:
    """The settings (other than the precision and how runs are scheduled) in which the sides differ."""
    keys = (set(fp32) | set(amp)) - set(PRECISION_SETTINGS)
    return sorted(key for key in keys if fp32.get(key) != amp.get(key))


def rows(fp32: Dict[str, dict], amp: Dict[str, dict]) -> List[dict]:
    result = []
    for name in sorted(set(fp32) & set(amp)):
        differing = comparable(fp32[name]["settings"], amp[name]["settings"])
        if differing:
            raise SystemExit(f"compare_precision.py: error: {name} was trained with other settings on the two sides "
                             f"({', '.join(differing)}); compare runs of the same recipe command")
        a, b = fp32[name], amp[name]
        result.append({"name": name, "bleu_fp32": a["bleu"], "bleu_amp": b["bleu"], "bleu_diff": b["bleu"] - a["bleu"],
                       "chrf_fp32": a["chrf"], "chrf_amp": b["chrf"], "chrf_diff": b["chrf"] - a["chrf"],
                       "within_tolerance": abs(b["bleu"] - a["bleu"]) <= TOLERANCE,
                       "valid_bleu_fp32": a["valid_bleu"], "valid_bleu_amp": b["valid_bleu"],
                       "train_wall_s_fp32": a.get("train_wall_s"), "train_wall_s_amp": b.get("train_wall_s"),
                       "updates": a["settings"].get("max_update")})
    if not result:
        raise SystemExit("compare_precision.py: error: no model is on both sides")
    return result


def plot(table: List[dict], path: Path) -> Optional[Path]:
    from fairseq_ctx.core.plots import PlotsUnavailableError, pyplot, require_plots

    try:
        require_plots("compare_precision.py (the validation curves)")
    except PlotsUnavailableError as err:
        print(err, file=sys.stderr)
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.5, 4))
    for number, row in enumerate(table):
        colour = f"C{number}"
        for precision, style in (("fp32", "-"), ("amp", "--")):
            curve = row[f"valid_bleu_{precision}"]
            axis.plot([u for u, _ in curve], [b for _, b in curve], style, color=colour,
                      label=f"{row['name']}, {'float32' if precision == 'fp32' else '--amp (bfloat16)'}")
    axis.set_xlabel("updates")
    axis.set_ylabel("validation BLEU (greedy)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def markdown(table: List[dict], header: Dict[str, str], picture: Optional[Path]) -> str:
    lines = ["# Multi30k en→de: float32 against --amp (bfloat16 mixed precision on the CPU)", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    lines += ["", f"Equal quality: test BLEU within ±{TOLERANCE} of float32's.", "",
              "| model | updates | BLEU fp32 | BLEU --amp | Δ | chrF fp32 | chrF --amp | Δ | within ±0.5 |",
              "|---|---|---|---|---|---|---|---|---|"]
    for row in table:
        lines.append(f"| {row['name']} | {row['updates']} | {row['bleu_fp32']:.2f} | {row['bleu_amp']:.2f} | "
                     f"{row['bleu_diff']:+.2f} | {row['chrf_fp32']:.2f} | {row['chrf_amp']:.2f} | {row['chrf_diff']:+.2f} | "
                     f"{'yes' if row['within_tolerance'] else 'no'} |")
    lines += ["", "Greedy validation BLEU every validation (float32 / --amp):", ""]
    for row in table:
        amp = dict(row["valid_bleu_amp"])
        pairs = [f"{u}: {b:.2f} / {amp[u]:.2f}" for u, b in row["valid_bleu_fp32"] if u in amp]
        lines.append(f"- {row['name']}: " + "; ".join(pairs))
    if picture is not None:
        lines += ["", f"![validation curves]({picture.name})"]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fp32", nargs="+", required=True, help="results files of the float32 run")
    parser.add_argument("--amp", nargs="+", required=True, help="results files of the --amp run")
    parser.add_argument("--out", required=True, help="directory for precision.{md,json,png}")
    parser.add_argument("--note", action="append", default=[], help="a line added to the header (repeatable)")
    args = parser.parse_args(argv)
    table = rows(read_models(args.fp32), read_models(args.amp))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    picture = plot(table, out / "precision.png")
    header = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "float32 results": ", ".join(args.fp32), "--amp results": ", ".join(args.amp),
              "command": " ".join(shlex.quote(a) for a in ["examples/multimodal_mt/compare_precision.py",
                                                           *(sys.argv[1:] if argv is None else argv)])}
    header.update({f"note {number}": note for number, note in enumerate(args.note, 1)})
    (out / "precision.md").write_text(markdown(table, header, picture), encoding="utf-8")
    (out / "precision.json").write_text(json.dumps({**header, "tolerance_bleu": TOLERANCE, "models": table}, indent=2),
                                        encoding="utf-8")
    print(out / "precision.md")


if __name__ == "__main__":
    main()
