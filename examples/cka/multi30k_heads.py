"""Inter-head diversity controls on a real model (Yun, 2022, §4.3, Tables 4.4 and 4.5): the
text-only en→de Transformer of examples/multimodal_mt/multi30k_multisource.py on Multi30k task 1
(same data preparation, sizes and training settings), trained through ``--criterion
head_diversity`` as a baseline (no term: the same training as label_smoothed_cross_entropy), with
drophead (``--drophead γ``) and with the HSIC regularizer (``--hsic-lambda λ``); then each model's
inter-head CKA and SVCCA (fairseq-ctx-analyze-heads) on the validation sentences, and its test
BLEU and chrF. multi30k_heads_results.py writes ``multi30k_heads.{md,json}`` with the
hypotheses the scores come from, and states whether Table 4.5's directions (drophead raises,
HSIC lowers inter-head similarity) and Table 4.4's (neither costs BLEU) held.

    python -m examples.cka.multi30k_heads path/to/dataset/data/task1/tok [--seeds 1,2,3]

Variants (``--variants``): ``baseline``, ``drophead<γ>``, ``hsic<λ>``; default baseline,
drophead0.1, drophead0.3, hsic1e-7 (the thesis' γ 0.1 and λ 1e-7) and hsic1e-2 (with this HSIC,
λ 1e-7 gives the term about 1e-6 of the cross-entropy's gradient on the trained model, 1e-2 about
0.13: results/hsic_weight.md), 5000 updates each. The work
layout, resumption, ``--seeds``, ``--jobs``, ``--threads``, ``--precision``, ``--test-sets`` and
``--results`` are those of the multi-source recipe; each run's head analysis is in
``heads/<variant>/``. ``--earlier-results`` adds the runs of a results folder the recipe wrote
before, when its work directory is gone (heads_earlier.py): they are reported, not trained again.
"""
import argparse
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence


from examples.multimodal_mt.multi30k_multisource import (OLD_PROTOCOL, Invocation, RunContext, add_model_arguments,
                                  add_run_arguments, finish_model, parse_command_line, run_and_report, start_run)
from devtools.recipe_runs import seed_option
from devtools.recipe_tools import Step, run, write_json
from examples.cka.heads_baseline import BASELINE, adopt_baseline, source_problem
from examples.cka.heads_earlier import SUMMARY, read_earlier_results
from examples.multimodal_mt.multi30k_data import TARGET, data_file
from examples.multimodal_mt.multi30k_earlier import add_earlier_results_option, load_earlier_results, skipping_earlier
from examples.multimodal_mt.multi30k_runs import Model, ModelRun, RunTable, missing_work

SCRIPT = "examples/cka/multi30k_heads.py"
PROGRAM = "multi30k_heads.py"
VARIANTS = "baseline,drophead0.1,drophead0.3,hsic1e-7,hsic1e-2"
VARIANT = re.compile(r"(?P<kind>baseline|drophead|hsic)(?P<value>[0-9.e-]*)")
HEAD_DIVERSITY = ["--criterion", "head_diversity", "--label-smoothing", "0.1"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, "work/multi30k_heads", "variants and seeds")
    parser.add_argument("--variants", default=VARIANTS,
                        help="comma-separated: baseline, drophead<γ> (e.g. drophead0.1), hsic<λ> (e.g. hsic1e-7)")
    parser.add_argument("--max-positions", type=int, default=2000,
                        help="query positions per attention module the head analysis collects (validation split)")
    parser.add_argument("--analysis-batch-size", type=int, default=32, help="sentences per forward pass of the head analysis")
    parser.add_argument("--baseline-from", metavar="WORK",
                        help="the --work of examples/multimodal_mt/multi30k_multisource.py: each seed's baseline is "
                             "that recipe's text-only run of the seed, not trained again (the same data, model, "
                             "settings and loss); its settings must be this run's, its files are only read")
    add_earlier_results_option(parser, SUMMARY)
    add_model_arguments(parser)
    parser.set_defaults(**OLD_PROTOCOL)  # the settings of the committed CKA tables
    return parser


def variant_criterion(name: str) -> Optional[List[str]]:
    """The fairseq criterion options of a variant; None when ``name`` is not one."""
    match = VARIANT.fullmatch(name)
    if match is None:
        return None
    kind, text = match.group("kind"), match.group("value")
    if kind == "baseline":
        return None if text else list(HEAD_DIVERSITY)
    try:
        value = float(text)
    except ValueError:
        return None
    if kind == "drophead" and 0 < value < 1:
        return [*HEAD_DIVERSITY, "--drophead", text]
    if kind == "hsic" and value > 0:
        return [*HEAD_DIVERSITY, "--hsic-lambda", text]
    return None


def heads_dir(model_run: ModelRun) -> Path:
    return model_run.seed_dir / "heads" / model_run.name


def analysis_step(model_run: ModelRun, out: Path) -> Step:
    args = model_run.args
    return Step("fairseq-ctx-analyze-heads", [
        str(model_run.seed_dir / "data-bin"), "--path", str(model_run.checkpoint_dir / "checkpoint_best.pt"),
        "--split", "valid", "--batch-size", str(args.analysis_batch_size), "--max-positions", str(args.max_positions),
        "--output-dir", str(out), "--tag", model_run.name])


def analysis_settings_of(args: argparse.Namespace) -> Dict[str, int]:
    return {"max_positions": args.max_positions, "batch_size": args.analysis_batch_size}


def analysis_settings(model_run: ModelRun) -> Dict[str, int]:
    return analysis_settings_of(model_run.args)


def missing_variant(model_run: ModelRun) -> List[str]:
    """What a run still lacks: training, test sets, or its head analysis (with this run's analysis settings)."""
    missing = missing_work(model_run)
    if missing:
        return missing
    done = model_run.record().get("heads")
    return [] if done is not None and done["settings"] == analysis_settings(model_run) else ["head analysis"]


def finish_variant(model_run: ModelRun) -> None:
    """Train (or, with ``--baseline-from``, adopt the baseline: heads_baseline.py) and decode (the
    multi-source recipe's ``finish_model``), then the head analysis of the best checkpoint into
    ``heads/<variant>/``, recorded in the run's results file."""
    if model_run.name == BASELINE and model_run.args.baseline_from and model_run.record() is None:
        adopt_baseline(model_run, Path(model_run.args.baseline_from).resolve())
    finish_model(model_run)
    if not missing_variant(model_run):
        return
    record = model_run.record()
    out, partial = heads_dir(model_run), heads_dir(model_run).with_name(model_run.name + ".partial")
    for directory in (out, partial):
        shutil.rmtree(directory, ignore_errors=True)  # of an earlier training of this variant
    step = analysis_step(model_run, out)
    start = time.time()
    run(analysis_step(model_run, partial))
    partial.rename(out)
    record["heads"] = {"command": step.shell, "wall_s": time.time() - start, "settings": analysis_settings(model_run)}
    write_json(model_run.record_path, record)


def refuse_unusable_baselines(parser: argparse.ArgumentParser, args: argparse.Namespace, variants: Sequence[str],
                              context: RunContext) -> None:
    """With the baseline among ``variants``, ``--baseline-from`` needs, for each seed whose baseline
    is not done here yet, a finished text-only run of that seed with this run's settings."""
    if BASELINE not in variants:
        return
    for seed, directory in context.seeds:
        if not (directory / "results" / f"{BASELINE}.json").exists():
            problem = source_problem(Path(args.baseline_from).resolve(), seed,
                                     {**context.settings[seed], "criterion": " ".join(HEAD_DIVERSITY)})
            if problem is not None:
                parser.error(f"--baseline-from: {problem}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    start = time.time()
    parser = build_parser()
    argv, args = parse_command_line(parser, argv)
    variants = [name for name in args.variants.split(",") if name]
    unknown = [name for name in variants if variant_criterion(name) is None]
    if unknown or not variants or len(set(variants)) != len(variants):
        parser.error(f"--variants {args.variants!r}: give distinct variants, each baseline, drophead<γ> with "
                     f"0 < γ < 1 (e.g. drophead0.1) or hsic<λ> with λ > 0 (e.g. hsic1e-7)")
    if args.max_positions < 2 or args.analysis_batch_size < 1:
        parser.error("--max-positions must be at least 2 and --analysis-batch-size at least 1")
    context = start_run(args, PROGRAM, [])
    if args.baseline_from:
        refuse_unusable_baselines(parser, args, variants, context)
    earlier = load_earlier_results(parser, args, context.results, lambda folder: read_earlier_results(
        folder, context.common_settings(), analysis_settings_of(args), context.test_sets))
    invocation = Invocation(SCRIPT, PROGRAM, parser, argv, args, context, start)
    model = Model("text-only", None)

    def variant_run(name: str, seed: int, directory: Path) -> ModelRun:
        criterion = variant_criterion(name) or ["not a variant of this recipe"]
        settings = {**context.settings[seed], "criterion": " ".join(criterion)}
        return ModelRun(name, model, seed, directory, args, settings, context.test_sets, context.user_dir, criterion)

    def options(one: ModelRun) -> Dict[str, str]:
        return {**seed_option(args, one.seed), "--variants": one.name}

    def found(record: dict, seed: int, directory: Path) -> ModelRun:
        return variant_run(record["name"], seed, directory)

    def write(table: RunTable, data_steps: Sequence[Step]) -> List[Path]:
        from examples.cka.multi30k_heads_results import ONE_SEED, write_results

        budget = (f"{args.max_update} updates of {args.batch_size} sentences per variant, greedy validation BLEU "
                  f"every {args.validate_every} updates; the checkpoint of the best validation BLEU is tested and "
                  f"analysed")
        references = {stem: data_file(args.data, stem, TARGET) for stem in context.test_sets}
        run_info = {**invocation.describe(data_steps, budget, table.trained, ONE_SEED),
                    "analysis": analysis_settings_of(args)}
        kept = None if earlier is None else earlier.without({(r.name, r.seed) for r in table.trained})
        return write_results(table, context.results, run_info, references, heads_dir, kept)

    runs = [variant_run(name, seed, directory) for seed, directory in context.seeds for name in variants]
    run_and_report(invocation, runs, [], options, found, write, finish=finish_variant,
                   missing=skipping_earlier(earlier, missing_variant))


if __name__ == "__main__":
    main()
