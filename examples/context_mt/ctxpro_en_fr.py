"""Generative context evaluation of trained en→fr models on ctxpro sets (Wicks & Post, 2023).

Every ``--model NAME=CHECKPOINT`` translates every ``--set`` (a released ctxpro eval-set JSON, its
``<eos>``-joined input file next to it) with ``fairseq-ctx-generative --format ctxpro``: each example
with its preceding sentences as the model's context, scored as ``ctxpro score`` scores it (the
expected form in the last sentence of the translation). Reported per set and rule: each model's
accuracy with a 95% bootstrap interval over the examples, and each model minus ``--baseline`` (a
sentence-level model: the no-context number) on the same examples, with a paired bootstrap
interval and p-value (``devtools/bootstrap_intervals.py``).

Usage (from the repository root, package installed; the ctxpro sets: github.com/rewicks/ctxpro,
``release/``; checkpoints, e.g., of the SCAT recipe, scat_en_fr.py):

    python -m examples.context_mt.ctxpro_en_fr \\
        --set ctxpro/release/auxiliary.opensubtitles.en-fr.dev.json \\
        --model sentence=work/scat/models/sentence/checkpoints/checkpoint_averaged.pt \\
        --model hmce=work/scat/seed1/models/hmce/checkpoints/checkpoint_last.pt \\
        --baseline sentence --spm work/scat/spm/spm.model --data work/scat/data-bin/scat \\
        --results examples/context_mt/results/ctxpro_en_fr

Writes ``ctxpro_en_fr.{md,json}`` and ``ctxpro_en_fr.translations/SET.MODEL.fr`` (the translations
scored, one line per example: ``ctxpro score -t`` reads them) into ``--results``; the tool commands
go to ``--work``/commands.sh. A translation already in ``--work`` is not made again.
"""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


from devtools.bootstrap_intervals import accuracy_interval, paired_difference_interval
from devtools.results_file import script_command
from devtools.recipe_report import facts_lines
from devtools.recipe_runs import log_to_stdout
from devtools.recipe_tools import Step, run

SCRIPT = "examples/context_mt/ctxpro_en_fr.py"
STEM = "ctxpro_en_fr"


def model_spec(value: str) -> Tuple[str, str]:
    """``NAME=CHECKPOINT`` (the argparse type of ``--model``)."""
    name, sep, checkpoint = value.partition("=")
    if not sep or not name or not checkpoint or "/" in name:
        raise argparse.ArgumentTypeError(f"{value!r}: give NAME=CHECKPOINT (a NAME without '/')")
    return name, checkpoint


def set_name(path: str) -> str:
    """``auxiliary.opensubtitles.en-fr.dev.json`` → ``auxiliary.opensubtitles.en-fr.dev``."""
    name = Path(path).name
    return name[:-len(".json")] if name.endswith(".json") else name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxpro_en_fr.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="sets", action="append", required=True, metavar="SET.json",
                        help="a released ctxpro eval set (its SET.input beside it); repeatable")
    parser.add_argument("--model", dest="models", type=model_spec, action="append", required=True,
                        metavar="NAME=CHECKPOINT", help="a model to evaluate; repeatable")
    parser.add_argument("--baseline", help="the NAME of the no-context model every other model is compared with "
                                           "(default: the first --model)")
    parser.add_argument("--spm", help="the sentencepiece model of the checkpoints' data (none: the text as it is)")
    parser.add_argument("--lang", default="fr", help="target language (ctxpro's sentence splitter)")
    parser.add_argument("--data", required=True, help="a directory with the checkpoints' dictionaries")
    parser.add_argument("--beam", type=int, default=5, help="beam size")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the models translate")
    parser.add_argument("--work", default="work/ctxpro_en_fr", help="scratch directory: translations, reports, commands")
    parser.add_argument("--results", default=None, help="results directory (default: WORK/results)")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    names = [name for name, _ in args.models]
    if len(set(names)) != len(names):
        parser.error(f"--model names must differ: {', '.join(names)}")
    args.baseline = args.baseline or names[0]
    if args.baseline not in names:
        parser.error(f"--baseline {args.baseline} is none of the --model names ({', '.join(names)})")
    missing = [p for p in [*args.sets, *(c for _, c in args.models), *([args.spm] if args.spm else [])]
               if not Path(p).is_file()]
    missing += [str(Path(s).with_suffix(".input")) for s in args.sets if not Path(s).with_suffix(".input").is_file()]
    if missing:
        parser.error(f"missing: {', '.join(missing)}")
    if len({set_name(s) for s in args.sets}) != len(args.sets):
        parser.error("two --set files have the same name")
    if args.beam < 1 or args.batch_size < 1:
        parser.error("--beam and --batch-size must be at least 1")
    return args


def translate(args: argparse.Namespace, work: Path, set_path: str, name: str, checkpoint: str) -> Dict:
    """The ctxpro report of one model on one set (made once: kept in WORK/SET.MODEL.json)."""
    report = work / f"{set_name(set_path)}.{name}.json"
    if report.exists():
        print(f"== {set_name(set_path)}, {name}: translated earlier ({report})", flush=True)
        return json.loads(report.read_text(encoding="utf-8"))
    print(f"== {set_name(set_path)}, {name}: translate and score", flush=True)
    started = time.time()
    run(Step("fairseq-ctx-generative", [
        checkpoint, "--data", args.data, *(["--spm", args.spm] if args.spm else []), "--format", "ctxpro", "--input",
        set_path, "--lang", args.lang,
        "--beam", str(args.beam), "--batch-size", str(args.batch_size), *(["--cpu"] if args.device == "cpu" else []),
        "--output", str(work / f"{set_name(set_path)}.{name}.fr"), "--json", str(report)]),
        record=work / "commands.sh")
    result = json.loads(report.read_text(encoding="utf-8"))
    result["seconds"] = round(time.time() - started, 1)
    report.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    return result


def rule_rows(results: Dict[str, Dict], baseline: str) -> List[Dict]:
    """Per rule (and overall): each model's accuracy interval and its paired difference from the
    baseline's on the same examples."""
    first = next(iter(results.values()))
    groups = {rule: [i for i, e in enumerate(first["examples"]) if e["rule"] == rule] for rule in first["rules"]}
    groups["all"] = list(range(len(first["examples"])))
    rows = []
    for rule, indices in groups.items():
        outcomes = {name: [bool(r["examples"][i]["correct"]) for i in indices] for name, r in results.items()}
        rows.append({"rule": rule, "examples": len(indices),
                     "accuracy": {name: accuracy_interval(flags) for name, flags in outcomes.items()},
                     "difference": {name: paired_difference_interval(flags, outcomes[baseline])
                                    for name, flags in outcomes.items() if name != baseline}})
    return rows


def set_lines(name: str, rows: Sequence[Dict], models: Sequence[str], baseline: str) -> List[str]:
    others = [m for m in models if m != baseline]
    lines = [f"## {name}", "", "| rule | examples | " + " | ".join(models) + " | "
             + " | ".join(f"{m} − {baseline}" for m in others) + " |", "|---|---|" + "---|" * (len(models) + len(others))]
    for row in rows:
        accuracy = [f"{row['accuracy'][m]['accuracy']:.3f} [{row['accuracy'][m]['low']:.3f}, "
                    f"{row['accuracy'][m]['high']:.3f}]" for m in models]
        difference = [f"{row['difference'][m]['difference']:+.3f} [{row['difference'][m]['low']:+.3f}, "
                      f"{row['difference'][m]['high']:+.3f}], p {row['difference'][m]['p']:.3f}" for m in others]
        lines.append(f"| {row['rule']} | {row['examples']} | " + " | ".join(accuracy + difference) + " |")
    return lines + [""]


def markdown(args: argparse.Namespace, command: str, tables: Dict[str, List[Dict]], seconds: Dict) -> str:
    models = [name for name, _ in args.models]
    comparisons = sum(len(rows) for rows in tables.values()) * (len(models) - 1)
    lines = ["# ctxpro en→fr: generative context evaluation (Wicks & Post, 2023)", "",
             *facts_lines(command, "float32 (decoding)", f"beam {args.beam}, batch {args.batch_size} sentences",
                          "models: " + ", ".join(f"{n} = `{c}`" for n, c in args.models),
                          f"baseline (no context): {args.baseline}"), "",
             "Accuracy: the expected form in the last sentence of the translation, the ctxpro package's check "
             "(`fairseq-ctx-generative --format ctxpro`, the counts of `ctxpro score`); [95% percentile bootstrap "
             "interval over the examples, 2000 resamples]; differences: paired bootstrap on the same examples, "
             f"two-sided p. {comparisons} differences are reported: at p < 0.05 about {comparisons * 0.05:.1f} of "
             "them would fall below it by chance alone.", ""]
    for name, rows in tables.items():
        lines += set_lines(name, rows, models, args.baseline)
    lines += ["## Files", "", f"- `{STEM}.translations/SET.MODEL.fr`: the translations scored, one line per example "
              "(`ctxpro score -e SET.json -t FILE -l fr` recounts them)",
              "- translation time: " + ", ".join(f"{k}: {v / 60:.1f} min" for k, v in seconds.items()), ""]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parse_args(parser, argv)
    log_to_stdout()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results_dir = Path(args.results) if args.results else work / "results"
    tables, payload, seconds = {}, {}, {}
    for set_path in args.sets:
        results = {name: translate(args, work, set_path, name, checkpoint) for name, checkpoint in args.models}
        tables[set_name(set_path)] = rule_rows(results, args.baseline)
        payload[set_name(set_path)] = {name: {k: v for k, v in r.items() if k != "examples"}
                                       for name, r in results.items()}
        seconds.update({f"{set_name(set_path)}.{name}": r.get("seconds", 0.0) for name, r in results.items()})
    results_dir.mkdir(parents=True, exist_ok=True)
    translations = results_dir / f"{STEM}.translations"
    shutil.rmtree(translations, ignore_errors=True)
    translations.mkdir()
    for set_path in args.sets:
        for name, _ in args.models:
            shutil.copyfile(work / f"{set_name(set_path)}.{name}.fr", translations / f"{set_name(set_path)}.{name}.fr")
    command = script_command(SCRIPT, argv)
    (results_dir / f"{STEM}.json").write_text(json.dumps(
        {"command": command, "baseline": args.baseline, "models": dict(args.models), "sets": payload,
         "rules": tables}, indent=2, ensure_ascii=False), encoding="utf-8")
    (results_dir / f"{STEM}.md").write_text(markdown(args, command, tables, seconds), encoding="utf-8")
    print(f"== results: {results_dir / (STEM + '.md')}", flush=True)


if __name__ == "__main__":
    main()
