"""Multi30k task 1 with a second source language: en+fr→de and en+cs→de against text-only en→de.

Trains the four Transformer strategies of Libovický (2019, §5.2) (``--arch
hierarchical_attention_decoder --combination serial|parallel|flat|hierarchical``) and the RNN with
hierarchical attention (``--arch multisource_rnn --combination hierarchical``) with ``--extra-source-langs
fr`` resp. ``cs``, plus one text-only en→de Transformer, all with the same budget (updates, batch,
lr schedule), for one seed or several (``--seeds``). Each model: validation BLEU logged every
``--validate-every`` updates (greedy, fairseq ``--eval-bleu``), then beam search on each test set
(``--test-sets``), and for a multi-source model again with the second source shuffled across the
test set (the shuffling of ``fairseq-ctx-adversarial``). multi30k_results.py writes the tables
(``multi30k_multisource.{md,json,png}``) and the hypotheses they were scored from.

Data (Elliott et al., 2016), not downloaded here: https://github.com/multi30k/dataset, ``data/task1/tok/``
holds ``{train,val,test_2016_flickr,…}.lc.norm.tok.{en,de,fr,cs}`` (lowercased, normalised,
Moses-tokenised; 29,000 / 1,014 / 1,000 lines). Pass that directory as the first argument.

    python examples/multimodal_mt/multi30k_multisource.py path/to/dataset/data/task1/tok

Every stage whose output exists is skipped (sentencepiece, binarization, each trained model, each
decoded test set), so rerunning the same command resumes; ``--models`` / ``--pairs`` / ``--seeds``
run a subset. Work layout: one seed's models in ``--work`` (``spm/``, ``data-bin/``,
``checkpoints/<model>/``, ``eval/<model>/``, ``results/<model>.json``); with ``--seeds`` each seed
N in ``<work>/seed<N>/``, laid out the same way.
"""
import argparse
import datetime
import json
import logging
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

REPOSITORY = str(Path(__file__).resolve().parents[2])  # holds devtools, the helpers of the scripts and tests
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

from devtools.machine_facts import this_machine  # noqa: E402
from devtools.train_log import validation_curve  # noqa: E402
from multi30k_data import (DEFAULT_TEST, SOURCE, SPM_LANGS, TARGET, check_data, data_file, parse_test_sets,  # noqa: E402
                           prepare, split_name)
from multi30k_runs import (LABEL_SMOOTHED, Model, ModelRun, decoded_test_sets, missing_work,  # noqa: E402
                           refuse_other_settings, rerun_command, seed_dirs, survey, training_settings)
from recipe_jobs import Job, run_jobs  # noqa: E402
from recipe_steps import Step, captured_log, run, write_whole  # noqa: E402

SCRIPT = "examples/multimodal_mt/multi30k_multisource.py"
PROGRAM = "multi30k_multisource.py"
STRATEGIES = ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]
PAIRS = ["fr", "cs"]
SETTINGS = ["spm_vocab", "spm_langs", "max_update", "batch_size", "lr", "warmup_updates", "validate_every", "embed_dim",
            "ffn_dim", "layers", "heads", "rnn_hidden", "dropout", "beam", "max_len_a", "max_len_b", "precision"]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Data, model, training and decoding settings (every model of a run has the same)."""
    parser.add_argument("--spm-vocab", type=int, default=8000, help="joint sentencepiece BPE pieces over --spm-langs")
    parser.add_argument("--spm-langs", default=SPM_LANGS,
                        help="training text the sentencepiece model and the one dictionary are learnt from")
    parser.add_argument("--max-update", type=int, default=600, help="updates per model (the same for every model)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="sentences per update, the same for every model (a token limit would give the "
                             "text-only model more sentences: fairseq counts the second source's tokens too)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak lr of the inverse_sqrt schedule (every model)")
    parser.add_argument("--warmup-updates", type=int, default=200)
    parser.add_argument("--validate-every", type=int, default=200, help="validation (loss and greedy BLEU) interval in updates")
    parser.add_argument("--embed-dim", type=int, default=256, help="Transformer model dim (RNN: embeddings)")
    parser.add_argument("--ffn-dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3, help="encoder and decoder layers of the Transformers")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rnn-hidden", type=int, default=256, help="RNN encoder GRU size per direction (decoder: twice)")
    parser.add_argument("--dropout", type=float, default=0.3)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len-a", type=float, default=1.2,
                        help="hypotheses stop at max-len-a * source length + max-len-b pieces (validation and test)")
    parser.add_argument("--max-len-b", type=int, default=10)
    parser.add_argument("--precision", choices=["fp32", "amp"], default="amp",
                        help="training arithmetic: amp passes fairseq's --amp (mixed precision), fp32 does not; "
                             "decoding is fp32 either way")


def add_run_arguments(parser: argparse.ArgumentParser, work: str) -> None:
    """Where a run reads and writes, which seeds and test sets, and how many jobs at a time."""
    parser.add_argument("data", help="directory with {train,val,TEST_SET}.lc.norm.tok.{en,de,...}")
    parser.add_argument("--work", default=work, help="everything the recipe writes except the tables")
    parser.add_argument("--results", help="directory for the tables and their hypotheses (default: <work>/results-tables)")
    parser.add_argument("--seed", type=int, help="the one seed of a run without --seeds (default 1)")
    parser.add_argument("--seeds", help="comma-separated seeds, e.g. 1,2,3: seed N is trained in <work>/seed<N>/")
    parser.add_argument("--test-sets", default=DEFAULT_TEST,
                        help="comma-separated test set file stems, each translated and scored, e.g. "
                             "test_2016_flickr,test_2017_flickr,test_2017_mscoco")
    parser.add_argument("--jobs", type=int, default=2, help="models (or seeds) trained at the same time, each in its own process")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each job")
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")
    parser.add_argument("--report-only", action="store_true",
                        help="train and decode nothing: write the tables from the finished models, listing the rest")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    add_run_arguments(parser, "work/multi30k_multisource")
    parser.add_argument("--models", default=",".join(STRATEGIES), help=f"subset of {','.join(STRATEGIES)}")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="second source languages (subset of fr,cs)")
    add_model_arguments(parser)
    return parser.parse_args(argv)


def model_args(model: Model, args: argparse.Namespace) -> List[str]:
    aux = [] if model.extra is None else ["--extra-source-langs", model.extra]
    if model.strategy == "rnn-hierarchical":
        arch = ["--arch", "multisource_rnn", "--combination", "hierarchical", "--encoder-embed-dim", str(args.embed_dim),
                "--decoder-embed-dim", str(args.embed_dim), "--encoder-hidden-size", str(args.rnn_hidden),
                "--decoder-hidden-size", str(2 * args.rnn_hidden), "--attention-dim", str(args.embed_dim)]
    else:
        arch = ["--arch", "hierarchical_attention_decoder", "--share-all-embeddings"]
        if model.strategy != "text-only":
            arch += ["--combination", model.strategy]
        for side in ("encoder", "decoder"):
            arch += [f"--{side}-embed-dim", str(args.embed_dim), f"--{side}-ffn-embed-dim", str(args.ffn_dim),
                     f"--{side}-layers", str(args.layers), f"--{side}-attention-heads", str(args.heads)]
    return aux + arch


def train_step(model: Model, data_bin: Path, user_dir: str, ckpt: Path, args: argparse.Namespace,
               seed: int, criterion: Sequence[str] = LABEL_SMOOTHED) -> Step:
    precision = ["--amp"] if args.precision == "amp" else []
    return Step("fairseq-train", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET,
        *model_args(model, args), "--dropout", str(args.dropout),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--clip-norm", "1.0", "--lr", str(args.lr),
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(args.warmup_updates), *criterion,
        "--batch-size", str(args.batch_size), "--max-update", str(args.max_update), "--seed", str(seed), "--cpu",
        *precision, "--validate-interval", "100000", "--save-interval", "100000",
        "--validate-interval-updates", str(args.validate_every), "--save-interval-updates", str(args.validate_every),
        "--keep-interval-updates", "1", "--no-epoch-checkpoints",
        "--eval-bleu", "--eval-bleu-args",
        json.dumps({"beam": 1, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}), "--eval-bleu-remove-bpe", "sentencepiece",
        "--eval-tokenized-bleu", "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        "--num-workers", "0", "--log-format", "simple", "--log-interval", "50", "--save-dir", str(ckpt)])


def generate_step(model: Model, data_bin: Path, user_dir: str, path: Path, out: Path, args: argparse.Namespace,
                  split: str = "test") -> Step:
    aux = [] if model.extra is None else ["--extra-source-langs", model.extra]
    return Step("fairseq-generate", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET, *aux,
        "--path", str(path), "--gen-subset", split, "--beam", str(args.beam), "--batch-size", "64",
        "--max-len-a", str(args.max_len_a), "--max-len-b", str(args.max_len_b), "--num-workers", "0",
        "--required-batch-size-multiple", "1", "--post-process", "sentencepiece", "--cpu", "--results-path", str(out)])


def shuffled_data_dir(data_bin: Path, target: str, lang: str, split: str, seed: int) -> None:
    """``data_bin`` with split ``split``'s extra source ``lang`` permuted across the split, as
    ``fairseq-ctx-adversarial --shuffle LANG`` builds it."""
    import numpy as np

    from fairseq_ctx.multisource.adversarial import link_data_dir, shuffle_text

    skip = shuffle_text(str(data_bin), target, split, lang, TARGET, np.random.default_rng(seed))
    link_data_dir(str(data_bin), target, skip)


def decode(model_run: ModelRun, stem: str) -> dict:
    """Beam search over test set ``stem`` into ``eval/<name>/generate-<split>.txt`` and, for a
    multi-source model, with the second source shuffled into ``eval/<name>/shuffled/``."""
    model, args, data_bin = model_run.model, model_run.args, model_run.seed_dir / "data-bin"
    split, best, out = split_name(stem), model_run.checkpoint_dir / "checkpoint_best.pt", model_run.eval_dir
    start = time.time()
    steps = [generate_step(model, data_bin, model_run.user_dir, best, out, args, split)]
    run(steps[0])
    if model.extra is not None:
        shuffled = out / "shuffled"
        shuffled.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            shuffled_data_dir(data_bin, tmp, model.extra, split, model_run.seed)
            steps.append(generate_step(model, Path(tmp), model_run.user_dir, best, shuffled, args, split))
            run(steps[-1])
    return {"split": split, "eval_wall_s": time.time() - start, "commands": [step.shell for step in steps]}


def finish_model(model_run: ModelRun) -> None:
    """Train (or resume training) the model unless its results file exists, then decode every
    test set it has not been decoded on; ``results/<name>.json`` is written after training and
    after each test set."""
    out = model_run.eval_dir
    out.mkdir(parents=True, exist_ok=True)
    record = model_run.record()
    if record is None:
        train = train_step(model_run.model, model_run.seed_dir / "data-bin", model_run.user_dir,
                           model_run.checkpoint_dir, model_run.args, model_run.seed, model_run.criterion)
        start = time.time()
        with captured_log(out / "train.log"):
            run(train)
        for stale in [*out.glob("generate-*.txt"), *out.glob("shuffled/generate-*.txt")]:
            stale.unlink()  # decoded from an earlier training of this model
        model = model_run.model
        record = {"name": model_run.name, "strategy": model.strategy, "second_source": model.extra, "pair": model.pair,
                  "seed": model_run.seed, "updates": model_run.args.max_update,
                  "valid_bleu": validation_curve((out / "train.log").read_text(encoding="utf-8"), "bleu"),
                  "train_wall_s": time.time() - start, "train_command": train.shell,
                  "settings": model_run.settings, "test_sets": {}}
        write_whole(model_run.record_path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    for stem in model_run.test_sets:
        decoded = decoded_test_sets(record)
        if stem not in decoded:
            record["test_sets"] = {**decoded, stem: decode(model_run, stem)}
            write_whole(model_run.record_path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")


@dataclass
class RunContext:
    """What an invocation of a Multi30k recipe works out from its arguments before any work."""

    test_sets: List[str]
    spm_langs: List[str]
    counts: Dict[str, int]
    results: Path
    seeds: List[Tuple[int, Path]]
    settings: Dict[int, Dict[str, object]]
    user_dir: str


def start_run(args: argparse.Namespace, program: str, extra_langs: Sequence[str]) -> RunContext:
    """Check the options and the data (every file the run reads, before anything is written)."""
    if args.jobs < 1 or args.threads < 1:
        sys.exit(f"{program}: error: --jobs and --threads must be at least 1")
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO, stream=sys.stdout)
    test_sets = parse_test_sets(args.test_sets, program)
    spm_langs = [lang for lang in args.spm_langs.split(",") if lang]
    counts = check_data(args.data, test_sets, [SOURCE, TARGET, *extra_langs], spm_langs, program)
    work = Path(args.work).resolve()
    results = Path(args.results).resolve() if args.results else work / "results-tables"
    for option, path in (("--work", work), ("--results", results)):
        if path == Path(args.data).resolve():
            sys.exit(f"{program}: error: {option} {path} is the data directory; choose another directory")
    seeds = seed_dirs(args, work, program)
    settings = {seed: training_settings(args, seed, SETTINGS) for seed, _ in seeds}
    return RunContext(test_sets, spm_langs, counts, results, seeds, settings,
                      str(Path(__import__("fairseq_ctx").__file__).parent))


def train_and_decode(runs: Sequence[ModelRun], args: argparse.Namespace, context: RunContext,
                     extra_langs: Sequence[str], finish: Callable[[ModelRun], None] = finish_model,
                     missing: Callable[[ModelRun], List[str]] = missing_work) -> Tuple[List[Step], Dict[str, str]]:
    """Prepare each seed's data, then ``finish`` every run that lacks something, ``--jobs`` at a
    time; returns the data commands (of the first seed) and ``{run: error}`` of the runs that failed."""
    data_steps: List[Step] = []
    for _, directory in context.seeds:
        steps = prepare(args.data, directory, context.test_sets, extra_langs, context.spm_langs, args.spm_vocab,
                        args.workers)
        data_steps = data_steps or steps
    jobs = [Job(f"{r.name}, seed {r.seed}", finish, r, r.eval_dir / "job.log") for r in runs if missing(r)]
    return data_steps, run_jobs(jobs, args.jobs, args.threads)


def describe_run(args: argparse.Namespace, script: str, argv: Sequence[str], context: RunContext, start: float,
                 data_steps: Sequence[Step]) -> Dict[str, object]:
    """Date, machine, command, sizes, seeds, test sets, precision and settings, for the tables."""
    first_seed = context.seeds[0][0]
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": this_machine(torch_threads=args.threads).as_dict(),
            "command": " ".join(shlex.quote(a) for a in [script, *argv]),
            "this_invocation_wall_s": time.time() - start, "sentences": context.counts, "jobs": args.jobs,
            "seeds": [seed for seed, _ in context.seeds], "test_sets": context.test_sets, "precision": args.precision,
            "settings": {k: v for k, v in context.settings[first_seed].items() if k != "seed"},
            "data_commands": [s.shell for s in data_steps]}


def exit_on_failures(failures: Dict[str, str], program: str) -> None:
    if failures:
        sys.exit(f"{program}: error: {len(failures)} of the runs failed: "
                 + "; ".join(f"{name}: {error}" for name, error in failures.items())
                 + "; the tables list them with the command that resumes each")


def main(argv: Optional[Sequence[str]] = None) -> None:
    start = time.time()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    strategies = [s for s in args.models.split(",") if s]
    pairs = [p for p in args.pairs.split(",") if p]
    for name, chosen, known in (("--models", strategies, STRATEGIES), ("--pairs", pairs, PAIRS)):
        unknown = sorted(set(chosen) - set(known))
        if unknown:
            sys.exit(f"{PROGRAM}: error: {name} {','.join(unknown)} unknown; choose from {','.join(known)}")
    models = [Model(s, None) for s in strategies if s == "text-only"]
    models += [Model(s, p) for p in pairs for s in strategies if s != "text-only"]
    context = start_run(args, PROGRAM, pairs)

    def model_run(model: Model, seed: int, directory: Path) -> ModelRun:
        return ModelRun(model.name, model, seed, directory, args, context.settings[seed], context.test_sets,
                        context.user_dir)

    runs = [model_run(model, seed, directory) for seed, directory in context.seeds for model in models]
    refuse_other_settings(runs, PROGRAM)
    data_steps, failures = ([], {}) if args.report_only else train_and_decode(runs, args, context, pairs)
    seeds_option = "--seeds" if args.seeds is not None else "--seed"

    def resume(unfinished: ModelRun) -> str:
        return rerun_command(SCRIPT, argv, {seeds_option: str(unfinished.seed), "--models": unfinished.model.strategy,
                                            "--pairs": unfinished.model.extra or args.pairs},
                             drop=["--seed", "--seeds", "--report-only"])

    def found(record: dict, seed: int, directory: Path) -> ModelRun:
        return model_run(Model(record["strategy"], record["second_source"]), seed, directory)

    table = survey(runs, context.seeds, resume, found)
    from multi30k_results import write_results

    references = {stem: data_file(args.data, stem, TARGET) for stem in context.test_sets}
    written = write_results(table, context.results, describe_run(args, SCRIPT, argv, context, start, data_steps),
                            references)
    print("\n".join(str(p) for p in written))
    exit_on_failures(failures, PROGRAM)


if __name__ == "__main__":
    main()
