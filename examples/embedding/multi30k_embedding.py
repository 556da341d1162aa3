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
further --models. Results cover every trained model of the seeds' work directories.

    python examples/embedding/multi30k_embedding.py --data multi30k-dataset/data/task1/tok --work work/multi30k
"""
import argparse
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = str(Path(HERE).parents[1])  # holds devtools, the helpers of the scripts and tests
for directory in (HERE, REPOSITORY):
    if directory not in sys.path:
        sys.path.insert(0, directory)

from multi30k_data import (EVAL_PAIRS, TRAIN_PAIRS, URL, ExtraTest, RecipeError, check_data,  # noqa: E402
                           check_extra_test, load_state, prepare)
from multi30k_models import LAST, MODELS, PLATEAU, SIZES, Budget, ModelRun, quote  # noqa: E402
from multi30k_report import write_results  # noqa: E402
from multi30k_retrieval import mean_error, multi30k_rows, retrieval_rows  # noqa: E402
from recipe_runs import (Job, add_run_options, check_run_options, passed_on, results_dir, run_jobs,  # noqa: E402
                         seed_options, seed_work, seeds_of)

SCRIPT = "examples/embedding/multi30k_embedding.py"
TEST_SET = "test_2016_flickr"


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    parser.add_argument("--seed", type=int, default=1, help="the seed when --seeds is not given")
    add_run_options(parser, "models and seeds", ("--out-dir",))
    parser.add_argument("--no-eval", action="store_true", help="train only; write no results")
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
    return args


def child_command(args: argparse.Namespace, run: ModelRun) -> Tuple[str, ...]:
    """The recipe's own command training one model of one seed (and nothing else)."""
    settings = passed_on(args, skip=("models", "seeds", "jobs", "extra_test", "results", "no_eval"))
    return (sys.executable, os.path.abspath(__file__), *settings, "--models", run.name,
            *seed_options(run.seed, bool(args.seeds)), "--jobs", "1", "--no-eval")


def train_one(run: ModelRun, args: argparse.Namespace, prep: dict) -> None:
    valid_dir = os.path.join(run.work, "emb", run.name, "valid")
    run.train(prep["data_bin"], args.size, Budget(args.updates, args.validate_every), args.precision,
              lambda checkpoint: mean_error(multi30k_rows(checkpoint, prep["spm"], args.data, "valid", valid_dir,
                                                          args.k)))


def train_runs(pending: List[ModelRun], args: argparse.Namespace, prep: dict) -> List[str]:
    """Train ``pending`` here one after the other, or side by side in ``--jobs`` processes (one log
    each: WORK[/seed<N>]/job.NAME.log); returns the names of failed runs."""
    if len(pending) <= 1 or args.jobs == 1:
        for run in pending:
            train_one(run, args, prep)
        return []
    jobs = [Job(f"{run.name} seed {run.seed}", child_command(args, run), Path(run.work) / f"job.{run.name}.log")
            for run in pending]
    return [job.name for job in run_jobs(jobs, args.jobs, args.threads)]


def test_rows(run: ModelRun, state: dict, args: argparse.Namespace, prep: dict,
              extra_tests: Sequence[ExtraTest]) -> List[dict]:
    """Retrieval rows of one trained model on test_2016_flickr and every extra test set."""
    checkpoint = os.path.join(run.save_dir, state.get("checkpoint", LAST))
    out = os.path.join(run.work, "emb", run.name)
    sets = [(TEST_SET, multi30k_rows(checkpoint, prep["spm"], args.data, "test", os.path.join(out, "test"), args.k))]
    sets += [(test.name, retrieval_rows(checkpoint, prep["spm"], dict(zip(test.langs, test.paths)), [test.langs],
                                        os.path.join(out, "extra", test.name), args.k)) for test in extra_tests]
    return [{"model": run.name, "seed": run.seed, "test_set": name, **row} for name, rows in sets for row in rows]


def evaluate(args: argparse.Namespace, prep: dict, seeds: Sequence[int],
             extra_tests: Sequence[ExtraTest]) -> Tuple[List[dict], Dict[str, Dict[int, dict]]]:
    """The retrieval rows of every trained model of the seeds, and its run.json ({model: {seed: state}})."""
    rows: List[dict] = []
    runs: Dict[str, Dict[int, dict]] = {}
    for seed in seeds:
        for name in MODELS:
            run = ModelRun(name, seed, str(seed_work(Path(args.work), seed, bool(args.seeds))))
            state = load_state(run.run_path)
            if state is not None:
                print(f"== embed and xsim: {name}, seed {seed}", flush=True)
                rows += test_rows(run, state, args, prep, extra_tests)
                runs.setdefault(name, {})[seed] = state
    return rows, runs


def with_option(argv: Sequence[str], option: str, value: str) -> List[str]:
    """``argv`` with ``option`` set to ``value`` (replaced where given, appended otherwise)."""
    argv = list(argv)
    if option in argv:
        argv[argv.index(option) + 1] = value
        return argv
    return [*argv, option, value]


def unfinished(runs: Dict[str, Dict[int, dict]], requested: Sequence[ModelRun], argv: Sequence[str],
               budget: int) -> List[dict]:
    """Every requested run that has not stopped, and every run stopped at its budget before its
    plateau, with the command that resumes it."""
    command = f"python {SCRIPT} {quote(argv)}"
    listed = []
    for run in requested:
        if run.seed not in runs.get(run.name, {}):
            done = run.updates_done()
            state = (f"interrupted at update {done} of {budget} (resumes from {LAST})" if done
                     else "not trained yet")
            listed.append({"model": run.name, "seed": run.seed, "state": state, "resume": command})
    for name, by_seed in runs.items():
        for seed, state in by_seed.items():
            if state.get("stopped") == "budget":
                listed.append({"model": name, "seed": seed,
                               "state": f"stopped at its budget of {state['updates']} updates before the plateau",
                               "resume": f"python {SCRIPT} "
                                         f"{quote(with_option(argv, '--updates', str(2 * state['updates'])))}"})
    return listed


def main(argv: Optional[Sequence[str]] = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    seeds, seeded = seeds_of(args), bool(args.seeds)
    requested = [ModelRun(name, seed, str(seed_work(Path(args.work), seed, seeded)))
                 for seed in seeds for name in args.models]
    budget = Budget(args.updates, args.validate_every)
    try:
        counts = check_data(args.data, args.k)
        extra_tests = [check_extra_test(items, args.k) for items in args.extra_test]
        names = [test.name for test in extra_tests]
        if len(set(names)) != len(names) or TEST_SET in names:
            raise RecipeError(f"--extra-test sets are named after their first file: {', '.join(names)}; give files "
                              f"with distinct names (and not {TEST_SET})")
        os.makedirs(args.work, exist_ok=True)
        prep = prepare(args.data, args.work, args.bpe_vocab)
        pending = [run for run in requested
                   if not run.finished(run.args(prep["data_bin"], args.size, args.updates, args.precision), budget)]
        for run in requested:
            if run not in pending:
                print(f"== {run.name}, seed {run.seed}: finished earlier, skipped", flush=True)
        failed = train_runs(pending, args, prep)
    except RecipeError as err:
        sys.exit(f"multi30k_embedding: error: {err}")
    if args.no_eval:
        return {}
    start = time.time()
    rows, runs = evaluate(args, prep, seeds, extra_tests)
    report = write_results(results_dir(args, Path(args.work)), {
        "rows": rows, "runs": runs, "labels": {name: MODELS[name][0] for name in runs}, "lines": counts,
        "prepare_s": prep["wall_time_s"], "evaluate_s": time.time() - start,
        "command": f"python {SCRIPT} {quote(argv)}",
        "settings": {key: getattr(args, key) for key in ("size", "updates", "validate_every", "bpe_vocab", "k",
                                                         "threads", "jobs", "precision")},
        "seeds": seeds, "train_pairs": TRAIN_PAIRS, "unseen": EVAL_PAIRS[0], "test_set": TEST_SET,
        "extra_tests": [{"name": t.name, "langs": list(t.langs), "paths": list(t.paths)} for t in extra_tests],
        "rule": PLATEAU.describe(args.validate_every, args.updates) if args.validate_every else
        f"none: a fixed budget of {args.updates} updates (--validate-every 0)",
        "unfinished": unfinished(runs, requested, argv, args.updates)})
    if failed:
        sys.exit(f"multi30k_embedding: error: {len(failed)} run(s) failed: {', '.join(failed)}; see their "
                 f"job.NAME.log, then run the same command again to resume")
    return report


if __name__ == "__main__":
    main()
