"""Multi30k task 1 (Elliott et al., 2016), 4-way en/de/fr/cs: the multilingual embedding recipe of
Li (2021), ch. 4, with two pivot targets (en, de).

    Multi30k text -> one joint sentencepiece BPE model over en, de, fr, cs -> one shared dictionary,
    fairseq-preprocess per pair (fr-en fr-de cs-en cs-de en-de de-en) -> tmde, tmde + distance_constraint
    (cT-MDE), tmde_f, tmde_p, laser_bilstm, each per seed, with the same budget: a fixed number of
    updates, or (--validate-every K) until the validation xsim error plateaus -> fairseq-ctx-embed of
    every language of test_2016_flickr (--spm) and of every --extra-test set -> xsim (LASER's
    definition: ratio margin, k=4, textual error) for every language pair, both directions, the pair
    never seen in training (fr<->cs) first -> results .md / .json / .errors.tsv / .png.

Input (never downloaded here): ``data/task1/tok/`` of https://github.com/multi30k/dataset, i.e.
DATA/{train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr,cs}. Every stage is skipped when its output
exists (a model counts as finished when checkpoints/NAME/run.json exists; an interrupted training
resumes from its checkpoint_last.pt), so the recipe can be rerun after an interruption or with
further --models. Results cover every trained model of the seeds' work directories, and with
``--earlier-results FOLDER`` the runs of a results folder the recipe wrote before, whose work directory
is gone (embedding_earlier.py): those are reported from their kept retrieval errors, not trained again.

    python -m examples.embedding.multi30k_embedding --data multi30k-dataset/data/task1/tok --work work/multi30k
"""
import argparse
import functools
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


from examples.embedding.multi30k_embedding_data import (EVAL_PAIRS, TRAIN_PAIRS, URL, ExtraTest, RecipeError, check_data,
                           check_extra_test, prepare)
from examples.embedding.embedding_earlier import EarlierEmbeddings, read_earlier_results
from devtools.results_file import script_command
from devtools.recipe_report import run_header, unfinished_run
from devtools.recipe_tools import read_json
from devtools.train_log import NOT_RECORDED
from devtools.recipe_runs import (Job, add_report_only, add_run_options, check_report_only,
                                  check_run_options, failures_message, job_command, log_to_stdout, results_dir,
                                  resume_command, run_jobs, seed_dirs, seed_option)
from examples.embedding.multi30k_models import LAST, MODELS, PLATEAU, SIZES, Budget, ModelRun
from examples.embedding.multi30k_report import write_results
from examples.embedding.multi30k_retrieval import mean_error, multi30k_rows, retrieval_rows

SCRIPT = "examples/embedding/multi30k_embedding.py"
TEST_SET = "test_2016_flickr"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="multi30k_embedding.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help=f"directory with {{train,val,test_2016_flickr}}.lc.norm.tok."
                        f"{{en,de,fr,cs}}: data/task1/tok of {URL}")
    parser.add_argument("--work", default="work/multi30k_embedding", help="everything but the results goes here")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated subset of {','.join(MODELS)} to train (finished ones are skipped)")
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="model sizes: small (CPU, ~30 min per model), thesis (Table 4.1, GPUs), tiny (tests)")
    parser.add_argument("--updates", type=int, default=2400,
                        help="budget of every model: exactly this many updates, or with --validate-every at most this "
                             "many (2400: about 1.4 epochs of the 6 pairs at --size small)")
    parser.add_argument("--validate-every", type=int, default=0,
                        help="train until the validation xsim error plateaus: validate every K updates, stop when the "
                             "lowest error of the last fifth of the updates improves on the lowest before by less "
                             f"than {PLATEAU.min_gain:g} points (multi30k_models.PLATEAU) or at --updates, and test "
                             "the checkpoint of the lowest validation error; 0: train exactly --updates and test "
                             "checkpoint_last.pt")
    parser.add_argument("--extra-test", nargs=2, action="append", default=[], metavar=("FILE_A", "FILE_B"),
                        help="an extra parallel test set: two line-aligned text files, each in one of the four "
                             "languages, told by its suffix (.fr or .fra, e.g. tatoeba.fra-eng.fra "
                             "tatoeba.fra-eng.eng) "
                             "or as LANG=FILE; embedded as given (prepare it like the training data: lowercased, "
                             "Moses-tokenised); repeatable")
    parser.add_argument("--bpe-vocab", type=int, default=8000, help="joint sentencepiece BPE vocabulary")
    parser.add_argument("--k", type=int, default=4, help="nearest neighbours of the xsim ratio margin (LASER: 4)")
    parser.add_argument("--earlier-results", metavar="FOLDER",
                        help="a results folder this recipe wrote before (multi30k_embedding.json and .errors.tsv): "
                             "its runs are reported with this work directory's, from their kept retrieval errors, and "
                             "not trained again (for seeds whose work directory is gone); same settings required")
    add_report_only(parser)
    add_run_options(parser, "models and seeds", {"--results": ["--out-dir"], "--no-report": ["--no-eval"]})
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        parser.error(f"--models {args.models}: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {','.join(MODELS)}")
    args.models = names
    if args.updates < 1 or args.validate_every < 0:
        parser.error(f"--updates {args.updates} --validate-every {args.validate_every}: the budget must be at least 1 "
                     f"and the interval at least 0")
    check_run_options(parser, args)
    check_report_only(parser, args)
    return args


def train_one(run: ModelRun, args: argparse.Namespace, prep: dict) -> None:
    valid_dir = os.path.join(run.work, "emb", run.name, "valid")
    run.train(prep["data_bin"], args.size, Budget(args.updates, args.validate_every), args.precision, args.device,
              lambda checkpoint: mean_error(multi30k_rows(checkpoint, prep["spm"], args.data, "valid", valid_dir,
                                                          args.k, args.device)))


def result_settings(args: argparse.Namespace) -> Dict[str, object]:
    """The settings a results file records, which runs reported together must share."""
    return {key: getattr(args, key) for key in ("size", "updates", "validate_every", "bpe_vocab", "k")}


def train_runs(pending: List[ModelRun], parser: argparse.ArgumentParser, argv: Sequence[str],
               args: argparse.Namespace, prep: dict) -> Dict[str, str]:
    """Train ``pending``, ``--jobs`` at a time, each job the recipe restricted to one model and seed
    (log: WORK[/seed<N>]/job.NAME.log); returns ``{run: why it failed}``."""
    jobs = [Job(f"{run.name}, seed {run.seed}",
                job_command(parser, SCRIPT, argv, {**seed_option(args, run.seed), "--models": run.name}),
                Path(run.work) / f"job.{run.name}.log", functools.partial(train_one, run, args, prep))
            for run in pending]
    return run_jobs(jobs, args.jobs, args.threads)


def test_rows(run: ModelRun, state: dict, args: argparse.Namespace, prep: dict,
              extra_tests: Sequence[ExtraTest]) -> List[dict]:
    """Retrieval rows of one trained model on test_2016_flickr and every extra test set."""
    checkpoint = os.path.join(run.save_dir, state.get("checkpoint", LAST))
    out = os.path.join(run.work, "emb", run.name)
    sets = [(TEST_SET, multi30k_rows(checkpoint, prep["spm"], args.data, "test", os.path.join(out, "test"), args.k,
                                     args.device))]
    sets += [(test.name, retrieval_rows(checkpoint, prep["spm"], dict(zip(test.langs, test.paths)), [test.langs],
                                        os.path.join(out, "extra", test.name), args.k, args.device))
             for test in extra_tests]
    return [{"model": run.name, "seed": run.seed, "test_set": name, **row} for name, rows in sets for row in rows]


def evaluate(args: argparse.Namespace, prep: dict, extra_tests: Sequence[ExtraTest],
             earlier: Optional[EarlierEmbeddings]) -> Tuple[List[dict], Dict[str, Dict[int, dict]],
                                                           Optional[EarlierEmbeddings]]:
    """The retrieval rows of every trained model of the seeds and of the ``earlier`` runs this work
    directory lacks, their run.json ({model: {seed: state}}), and the earlier runs reported."""
    rows: List[dict] = []
    runs: Dict[str, Dict[int, dict]] = {}
    for seed, work in seed_dirs(args, Path(args.work)):
        for name in MODELS:
            run = ModelRun(name, seed, str(work))
            state = read_json(run.run_path)
            if state is not None:
                print(f"== embed and xsim: {name}, seed {seed}", flush=True)
                rows += test_rows(run, state, args, prep, extra_tests)
                runs.setdefault(name, {})[seed] = state
    if earlier is not None:
        earlier = earlier.without({(name, seed) for name, by_seed in runs.items() for seed in by_seed})
        rows += earlier.rows
        for name, by_seed in earlier.runs.items():
            runs.setdefault(name, {}).update(by_seed)
        order = list(MODELS)
        rows.sort(key=lambda row: (row["seed"], order.index(row["model"])))  # stable: directions keep their order
        runs = {name: dict(sorted(runs[name].items())) for name in order if name in runs}
    return rows, runs, earlier


def unfinished(runs: Dict[str, Dict[int, dict]], requested: Sequence[ModelRun], parser: argparse.ArgumentParser,
               argv: Sequence[str], args: argparse.Namespace) -> List[dict]:
    """Every requested run that has not stopped, and every run stopped at its budget before its
    plateau (resumed with twice the budget), with the command that resumes it."""
    def resume(name: str, seed: int, state: str, **options: str) -> dict:
        options = {**seed_option(args, seed), "--models": name, **options}
        return unfinished_run(name, seed, state, resume_command(parser, SCRIPT, argv, options, drop=["--report-only"]))

    listed = []
    for run in requested:
        if run.seed not in runs.get(run.name, {}):
            done = run.updates_done()
            listed.append(resume(run.name, run.seed, f"interrupted at update {done} of {args.updates} (resumes from "
                                                     f"{LAST})" if done else "not trained yet"))
    for name, by_seed in runs.items():
        for seed, state in by_seed.items():
            if state.get("stopped") == "budget":
                listed.append(resume(name, seed, f"stopped at its budget of {state['updates']} updates before the "
                                                 f"plateau", **{"--updates": str(2 * state["updates"])}))
    return listed


def convergence(runs: Dict[str, Dict[int, dict]], args: argparse.Namespace) -> Tuple[str, str]:
    """The convergence rule and its outcome over the runs, in words."""
    if not args.validate_every:
        return f"none: a fixed budget of {args.updates} updates (--validate-every 0)", "not judged (a fixed budget)"
    stopped = [state.get("stopped") for by_seed in runs.values() for state in by_seed.values()]
    return (PLATEAU.describe(args.validate_every, args.updates, stops=True),
            f"{stopped.count('plateau')} of {len(stopped)} run(s) reached the plateau, the others stopped at the "
            f"budget (per run below)")


def main(argv: Optional[Sequence[str]] = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parse_args(parser, argv)
    log_to_stdout()
    import torch

    torch.set_num_threads(args.threads)
    requested = [ModelRun(name, seed, str(work)) for seed, work in seed_dirs(args, Path(args.work))
                 for name in args.models]
    budget = Budget(args.updates, args.validate_every)
    if args.earlier_results and Path(args.earlier_results).resolve() == results_dir(args, Path(args.work)).resolve():
        parser.error(f"--results {args.results} is the --earlier-results folder, which the tables are made from; "
                     f"write them to another folder")
    earlier: Optional[EarlierEmbeddings] = None
    try:
        counts = check_data(args.data, args.k)
        extra_tests = [check_extra_test(items, args.k) for items in args.extra_test]
        names = [test.name for test in extra_tests]
        if len(set(names)) != len(names) or TEST_SET in names:
            raise RecipeError(f"--extra-test sets are named after their first file: {', '.join(names)}; give files "
                              f"with distinct names (and not {TEST_SET})")
        if args.earlier_results:
            try:
                earlier = read_earlier_results(Path(args.earlier_results), result_settings(args), args.precision,
                                               [TEST_SET, *names])
            except ValueError as error:
                raise RecipeError(str(error)) from None
            reported = set(earlier.keys())  # reported from their kept results: never trained again
            requested = [run for run in requested if (run.name, run.seed) not in reported]
        os.makedirs(args.work, exist_ok=True)
        prep = prepare(args.data, args.work, args.bpe_vocab)
        unfinished_runs = [run for run in requested
                           if not run.finished(run.args(prep["data_bin"], args.size, args.updates, args.precision,
                                                        args.device), budget)]
        for run in requested:
            if run not in unfinished_runs:
                print(f"== {run.name}, seed {run.seed}: finished earlier, skipped", flush=True)
        pending = [] if args.report_only else unfinished_runs
    except RecipeError as err:
        sys.exit(f"multi30k_embedding: error: {err}")
    failed = train_runs(pending, parser, argv, args, prep)
    if args.no_report:
        if failed:
            sys.exit(failures_message("multi30k_embedding", failed))
        return {}
    start = time.time()
    rows, runs, earlier = evaluate(args, prep, extra_tests, earlier)
    rule, outcome = convergence(runs, args)
    budget_text = (f"at most {args.updates} updates per model, validation every {args.validate_every} updates; the "
                   f"checkpoint of the lowest validation error is tested" if args.validate_every else
                   f"{args.updates} updates per model; the last checkpoint is tested")
    header = run_header(args, [seed for seed, _ in seed_dirs(args, Path(args.work))],
                        script_command(SCRIPT, argv), budget_text, rule, outcome,
                        trained_on={f"{name} seed {seed}": state.get("trained_on", [NOT_RECORDED])
                                    for name, by_seed in runs.items() for seed, state in by_seed.items()})
    report = write_results(results_dir(args, Path(args.work)), header, {
        "rows": rows, "runs": runs, "labels": {name: MODELS[name][0] for name in runs}, "lines": counts,
        "prepare_s": prep["wall_time_s"], "evaluate_s": time.time() - start,
        "settings": result_settings(args),
        "train_pairs": TRAIN_PAIRS, "unseen": EVAL_PAIRS[0], "test_set": TEST_SET,
        "extra_tests": [{"name": t.name, "langs": list(t.langs), "paths": list(t.paths)} for t in extra_tests],
        "unfinished": unfinished(runs, requested, parser, argv, args),
        "earlier_results": earlier.as_dict() if earlier is not None and earlier.runs else None})
    if failed:
        sys.exit(failures_message("multi30k_embedding", failed))
    return report


if __name__ == "__main__":
    main()
