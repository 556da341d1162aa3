"""Mean inter-head CKA/SVCCA per setting (from fairseq-ctx-analyze-heads heads.csv) → CSV + Markdown table."""
import argparse
import csv
import shlex
import sys
from pathlib import Path
from statistics import mean

from devtools.recipe_report import facts_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dirs", nargs="+", help="analysis output directories (one per setting)")
    parser.add_argument("--out", required=True, help="output prefix (.csv and .md are written)")
    parser.add_argument("--command", help="the command that trained and analysed the models (stated in the .md)")
    args = parser.parse_args()
    kinds = ("encoder_self", "decoder_self", "encoder_decoder")
    rows = []
    for directory in args.dirs:
        with open(Path(directory) / "heads.csv") as handle:
            records = list(csv.DictReader(handle))
        row = {"setting": records[0]["model"], "mean_cka": round(mean(float(r["mean_cka"]) for r in records), 4),
               "mean_svcca": round(mean(float(r["mean_svcca"]) for r in records), 4)}
        for kind in kinds:
            row[f"cka_{kind}"] = round(mean(float(r["mean_cka"]) for r in records if r["kind"] == kind), 4)
        rows.append(row)
    with open(f"{args.out}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [*facts_lines(args.command or shlex.join(sys.argv), "float32"), "",
             "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(str(v) for v in row.values()) + " |" for row in rows]
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
