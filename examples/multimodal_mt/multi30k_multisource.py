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

    python -m examples.multimodal_mt.multi30k_multisource path/to/dataset/data/task1/tok

Every stage whose output exists is skipped (sentencepiece, binarization, each trained model, each
decoded test set), so rerunning the same command resumes; ``--models`` / ``--pairs`` / ``--seeds``
run a subset. Work layout: one seed's models in ``--work`` (``spm/``, ``data-bin/``,
``checkpoints/<model>/``, ``eval/<model>/``, ``results/<model>.json``); with ``--seeds`` each seed
N in ``<work>/seed<N>/``, laid out the same way.
"""
import argparse
import functools
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple


from devtools.results_file import script_command
from devtools.recipe_report import run_header
from devtools.recipe_runs import (Job, add_report_only, add_run_options, check_report_only,
                                  check_run_options, device_args, failures_message, job_command, log_to_stdout,
                                  precision_args, results_dir, resume_command, run_jobs, seed_dirs, seed_option)
from devtools.recipe_tools import Step, captured_log, run, write_json
from devtools.transformer_tiny import TINY
from devtools.train_log import NOT_RECORDED, training_machines, training_seconds, validation_curve
from examples.multimodal_mt.multi30k_averaging import averaged_curve, budget_curve, tested_checkpoint
from examples.multimodal_mt.multi30k_evaluation import protocol_text
from examples.multimodal_mt.multi30k_continue import continuation_of, continue_run, refuse_uncontinuable, started_here
from examples.multimodal_mt.multi30k_data import (DEFAULT_TEST, SOURCE, SPM_LANGS, TARGET, VALID, check_data, data_file,
                           parse_test_sets, prepare, split_name)
from examples.multimodal_mt.multi30k_earlier import (add_earlier_results_option, earlier_results, load_earlier_results,
                              read_earlier_summary, skipping_earlier)
from examples.multimodal_mt.multi30k_results import SUMMARY
from examples.multimodal_mt.multi30k_runs import (LABEL_SMOOTHED, Model, ModelRun, RunTable, decoded_test_sets, missing_work,
                           refuse_other_settings, survey, training_settings)

SCRIPT = "examples/multimodal_mt/multi30k_multisource.py"
PROGRAM = "multi30k_multisource.py"
STRATEGIES = ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]
PAIRS = ["fr", "cs"]
SETTINGS = ["spm_vocab", "spm_langs", "max_update", "batch_size", "lr", "warmup_updates", "clip_norm", "average_last",
            "curve_every", "validate_every", "embed_dim", "ffn_dim", "layers", "heads", "rnn_hidden", "dropout", "beam",
            "max_len_a", "max_len_b", "precision"]
ONE_SEED = ("sacreBLEU's paired bootstrap over the test sentences decides (it treats the trained models as fixed and "
            "measures only the sampling of test sentences)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Data, model, training and decoding settings (every model of a run has the same). The defaults
    are the Transformer-tiny baseline of Wu et al. (2021; ``devtools.transformer_tiny``: ≈7,000
    target tokens per update, the average of the last 10 epoch checkpoints tested), with a budget
    one run trains within 150 minutes on 2 CPU cores."""
    parser.add_argument("--spm-vocab", type=int, default=8000, help="joint sentencepiece BPE pieces over --spm-langs")
    parser.add_argument("--spm-langs", default=SPM_LANGS,
                        help="training text the sentencepiece model and the one dictionary are learnt from")
    parser.add_argument("--max-update", type=int, default=2800,
                        help="updates per model (the same for every model); with the default batch, 40 epochs")
    parser.add_argument("--batch-size", type=int, default=420,
                        help="sentences per update, the same for every model: ≈7,000 German target pieces, the tokens "
                             "per update of Wu et al. (2021) (max-tokens 4096 on 2 GPUs); a token limit would give the "
                             "text-only model more sentences, as fairseq counts the second source's tokens too")
    parser.add_argument("--lr", type=float, default=TINY.lr, help="peak lr of the inverse_sqrt schedule (every model)")
    parser.add_argument("--warmup-updates", type=int, default=TINY.warmup_updates,
                        help="linear warmup of the lr schedule, in updates")
    parser.add_argument("--clip-norm", type=float, default=TINY.clip_norm,
                        help="gradient norm clipping (25: fairseq's default in the version Wu et al. (2021) trained with)")
    parser.add_argument("--average-last", type=int, default=TINY.average_last,
                        help="the tested model is the parameter average of the last N epoch checkpoints (Wu et al., "
                             "2021); 0: the checkpoint of the best greedy validation BLEU, validated every "
                             "--validate-every updates (the protocol of the tables before 2026-12)")
    parser.add_argument("--curve-every", type=int, default=5,
                        help="with --average-last N: the validation curve is the BLEU (beam search) of the average of "
                             "the N epoch checkpoints ending at epoch N, N + this, …, and the last epoch")
    parser.add_argument("--validate-every", type=int, default=200,
                        help="with --average-last 0: validation (loss and greedy BLEU) interval in updates")
    parser.add_argument("--embed-dim", type=int, default=TINY.embed_dim, help="Transformer model dim (RNN: embeddings)")
    parser.add_argument("--ffn-dim", type=int, default=TINY.ffn_dim, help="Transformer feed-forward dim")
    parser.add_argument("--layers", type=int, default=TINY.layers, help="encoder and decoder layers of the Transformers")
    parser.add_argument("--heads", type=int, default=TINY.heads, help="attention heads of the Transformers")
    parser.add_argument("--rnn-hidden", type=int, default=256, help="RNN encoder GRU size per direction (decoder: twice)")
    parser.add_argument("--dropout", type=float, default=TINY.dropout, help="dropout of every model")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the test and curve decoding")
    parser.add_argument("--max-len-a", type=float, default=1.2,
                        help="hypotheses stop at max-len-a * source length + max-len-b pieces (validation and test)")
    parser.add_argument("--max-len-b", type=int, default=10, help="see --max-len-a")


OLD_PROTOCOL = {"max_update": 5000, "batch_size": 64, "lr": 1e-3, "warmup_updates": 200, "clip_norm": 1.0,
                "average_last": 0, "embed_dim": 256, "ffn_dim": 1024, "layers": 3}
"""The settings of the tables before 2026-12 (best checkpoint by greedy validation BLEU), for the
recipes that keep reproducing them (parser defaults)."""


def add_run_arguments(parser: argparse.ArgumentParser, work: str, runs: str) -> None:
    """Where a run reads and writes, which test sets, and the options every recipe shares
    (seeds, jobs, threads, precision, results); ``runs`` names what the jobs are."""
    parser.add_argument("data", help="directory with {train,val,TEST_SET}.lc.norm.tok.{en,de,...}")
    parser.add_argument("--work", default=work, help="everything the recipe writes except the results files")
    parser.add_argument("--test-sets", default=DEFAULT_TEST,
                        help="comma-separated test set file stems, each translated and scored, e.g. "
                             "test_2016_flickr,test_2017_flickr,test_2017_mscoco")
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")
    add_report_only(parser)
    parser.add_argument("--continue-from", metavar="WORK",
                        help="another --work of this recipe: a run not started here continues WORK's run of the same "
                             "name and seed (same settings, fewer updates) from its last checkpoint, which equals one "
                             "run of --max-update updates; runs WORK does not have start over (WORK is only read)")
    add_run_options(parser, runs)


def parse_command_line(parser: argparse.ArgumentParser,
                       argv: Optional[Sequence[str]]) -> Tuple[List[str], argparse.Namespace]:
    """The command line (``argv``, else this process's) and its options, checked."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    check_run_options(parser, args)
    check_report_only(parser, args)
    return argv, args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, "work/multi30k_multisource", "models and seeds")
    parser.add_argument("--models", default=",".join(STRATEGIES), help=f"subset of {','.join(STRATEGIES)}")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="second source languages (subset of fr,cs)")
    add_earlier_results_option(parser, SUMMARY)
    parser.add_argument("--test-curve", action="store_true",
                        help="with --average-last N: also decode the first test set with every curve point's average, "
                             "the model a run of that many updates tests (the schedule does not depend on "
                             "--max-update): test BLEU by budget in one run; a finished run given it again adds it")
    add_model_arguments(parser)
    return parser


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


def checkpoint_args(args: argparse.Namespace) -> List[str]:
    """When fairseq-train validates and saves: every epoch, each epoch's checkpoint kept for the
    average (``--average-last``); or every ``--validate-every`` updates with greedy BLEU, the best
    kept as checkpoint_best.pt."""
    if args.average_last:
        return ["--save-interval", "1", "--validate-interval", "1"]
    return ["--validate-interval", "100000", "--save-interval", "100000",
            "--validate-interval-updates", str(args.validate_every), "--save-interval-updates", str(args.validate_every),
            "--keep-interval-updates", "1", "--no-epoch-checkpoints",
            "--eval-bleu", "--eval-bleu-args",
            json.dumps({"beam": 1, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}),
            "--eval-bleu-remove-bpe", "sentencepiece", "--eval-tokenized-bleu", "--best-checkpoint-metric", "bleu",
            "--maximize-best-checkpoint-metric"]


def train_step(model: Model, data_bin: Path, user_dir: str, ckpt: Path, args: argparse.Namespace,
               seed: int, criterion: Sequence[str] = LABEL_SMOOTHED) -> Step:
    return Step("fairseq-train", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET,
        *model_args(model, args), "--dropout", str(args.dropout),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--clip-norm", f"{args.clip_norm:g}", "--lr", str(args.lr),
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(args.warmup_updates), *criterion,
        "--batch-size", str(args.batch_size), "--max-update", str(args.max_update), "--seed", str(seed),
        *device_args(args.device), *precision_args(args.precision), *checkpoint_args(args),
        "--num-workers", "0", "--log-format", "simple", "--log-interval", "50", "--save-dir", str(ckpt)])


def generate_step(model: Model, data_bin: Path, user_dir: str, path: Path, out: Path, args: argparse.Namespace,
                  split: str = "test") -> Step:
    aux = [] if model.extra is None else ["--extra-source-langs", model.extra]
    return Step("fairseq-generate", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET, *aux,
        "--path", str(path), "--gen-subset", split, "--beam", str(args.beam), "--batch-size", "64",
        "--max-len-a", str(args.max_len_a), "--max-len-b", str(args.max_len_b), "--num-workers", "0",
        "--required-batch-size-multiple", "1", "--post-process", "sentencepiece", *device_args(args.device),
        "--results-path", str(out)])


def shuffled_data_dir(data_bin: Path, target: Path, lang: str, split: str, seed: int) -> None:
    """``data_bin`` with split ``split``'s extra source ``lang`` permuted across the split, as
    ``fairseq-ctx-adversarial --shuffle LANG`` builds it."""
    import numpy as np

    from fairseq_ctx.multisource.adversarial import link_data_dir, shuffle_text

    skip = shuffle_text(str(data_bin), target, split, lang, TARGET, np.random.default_rng(seed))
    link_data_dir(str(data_bin), target, skip)


def decode(model_run: ModelRun, stem: str) -> dict:
    """Beam search over test set ``stem`` into ``eval/<name>/generate-<split>.txt`` and, for a
    multi-source model, with the second source shuffled into ``eval/<name>/shuffled/``, from
    ``eval/<name>/shuffled/data-bin.<split>`` (the data-bin's files linked, the split's second
    source permuted by the seed), which stays so that the recorded command runs again as is."""
    model, args, data_bin = model_run.model, model_run.args, model_run.seed_dir / "data-bin"
    split, best, out = split_name(stem), tested_checkpoint(model_run), model_run.eval_dir
    start = time.time()
    steps = [generate_step(model, data_bin, model_run.user_dir, best, out, args, split)]
    run(steps[0])
    if model.extra is not None:
        shuffled = out / "shuffled"
        shuffled_data = shuffled / f"data-bin.{split}"
        if shuffled_data.exists():
            shutil.rmtree(shuffled_data)
        shuffled_data.mkdir(parents=True)
        shuffled_data_dir(data_bin, shuffled_data, model.extra, split, model_run.seed)
        steps.append(generate_step(model, shuffled_data, model_run.user_dir, best, shuffled, args, split))
        run(steps[-1])
    return {"split": split, "eval_wall_s": time.time() - start, "commands": [step.shell for step in steps]}


def validation_bleu(model_run: ModelRun, log: str) -> List[List[float]]:
    """The run's validation curve ``[[updates, BLEU], …]``: of its averaged epoch checkpoints
    (multi30k_averaging.py, which also writes the tested average), or, with ``--average-last 0``,
    the greedy BLEU its training log records."""
    if not model_run.args.average_last:
        return validation_curve(log, "bleu")

    def decode_valid(checkpoint: Path, out: Path) -> None:
        run(generate_step(model_run.model, model_run.seed_dir / "data-bin", model_run.user_dir, checkpoint, out,
                          model_run.args, "valid"))

    return averaged_curve(model_run, decode_valid, data_file(model_run.args.data, VALID, TARGET))


def finish_model(model_run: ModelRun) -> None:
    """Train (or resume training) the model unless its results file exists, then decode every
    test set it has not been decoded on; ``results/<name>.json`` is written after training (and
    the validation curve) and after each test set."""
    out = model_run.eval_dir
    out.mkdir(parents=True, exist_ok=True)
    record = model_run.record()
    if record is None:
        if model_run.args.continue_from and not started_here(model_run):
            continue_run(model_run, Path(model_run.args.continue_from).resolve())
        if model_run.checkpoint_dir.is_symlink():
            raise SystemExit(f"{model_run.checkpoint_dir} links to another run's checkpoints, which training would "
                             f"write into; delete the link to train {model_run.name} here")
        train = train_step(model_run.model, model_run.seed_dir / "data-bin", model_run.user_dir,
                           model_run.checkpoint_dir, model_run.args, model_run.seed, model_run.criterion)
        with captured_log(out / "train.log"):
            run(train)
        log = (out / "train.log").read_text(encoding="utf-8")
        for stale in [*out.glob("generate-*.txt"), *out.glob("shuffled/generate-*.txt")]:
            stale.unlink()  # decoded from an earlier training of this model
        model = model_run.model
        record = {"name": model_run.name, "strategy": model.strategy, "second_source": model.extra, "pair": model.pair,
                  "seed": model_run.seed, "updates": model_run.args.max_update,
                  "valid_bleu": validation_bleu(model_run, log), "train_wall_s": training_seconds(log),
                  "trained_on": training_machines(log),
                  "train_command": train.shell,
                  "settings": model_run.settings, "test_sets": {}}
        continued = continuation_of(model_run)
        if continued is not None:
            record["continued_from"] = continued
        write_json(model_run.record_path, record)
    for stem in model_run.test_sets:
        decoded = decoded_test_sets(record)
        if stem not in decoded:
            record["test_sets"] = {**decoded, stem: decode(model_run, stem)}
            write_json(model_run.record_path, record)
    if getattr(model_run.args, "test_curve", False) and model_run.args.average_last and "test_curve" not in record:
        stem = model_run.test_sets[0]

        def decode_test(checkpoint: Path, out: Path) -> None:
            run(generate_step(model_run.model, model_run.seed_dir / "data-bin", model_run.user_dir, checkpoint, out,
                              model_run.args, split_name(stem)))

        curve = budget_curve(model_run, decode_test, split_name(stem), data_file(model_run.args.data, stem, TARGET))
        record["test_curve"] = {stem: curve}
        write_json(model_run.record_path, record)


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

    def common_settings(self) -> Dict[str, object]:
        """The settings every seed of the run has (the first seed's, without the seed)."""
        return {k: v for k, v in self.settings[self.seeds[0][0]].items() if k != "seed"}


def start_run(args: argparse.Namespace, program: str, extra_langs: Sequence[str]) -> RunContext:
    """Check the data (every file the run reads, before anything is written)."""
    log_to_stdout()
    test_sets = parse_test_sets(args.test_sets, program)
    spm_langs = [lang for lang in args.spm_langs.split(",") if lang]
    counts = check_data(args.data, test_sets, [SOURCE, TARGET, *extra_langs], spm_langs, program)
    work = Path(args.work).resolve()
    results = results_dir(args, work).resolve()
    for option, path in (("--work", work), ("--results", results)):
        if path == Path(args.data).resolve():
            sys.exit(f"{program}: error: {option} {path} is the data directory; choose another directory")
    seeds = seed_dirs(args, work)
    settings = {seed: training_settings(args, seed, SETTINGS) for seed, _ in seeds}
    return RunContext(test_sets, spm_langs, counts, results, seeds, settings,
                      str(Path(__import__("fairseq_ctx").__file__).parent))


@dataclass
class Invocation:
    """One command of a Multi30k recipe: its script, parsed arguments and what they determine."""

    script: str
    program: str
    parser: argparse.ArgumentParser
    argv: List[str]
    args: argparse.Namespace
    context: RunContext
    start: float

    def resume(self, options: Dict[str, str]) -> str:
        """The command resuming the run that ``options`` select (its seed, models or variants)."""
        return resume_command(self.parser, self.script, self.argv, options, drop=["--report-only"])

    def job(self, options: Dict[str, str]) -> Tuple[str, ...]:
        """The command of the job doing the run that ``options`` select."""
        return job_command(self.parser, self.script, self.argv, options, drop=["--report-only"])

    def describe(self, data_steps: Sequence[Step], budget: str, trained: Sequence[ModelRun],
                 one_seed: str = ONE_SEED) -> Dict[str, object]:
        """The header (its convergence outcome is the results writer's to fill in; the machines the
        ``trained`` runs' logs record), sizes, test sets and settings, for the results files;
        ``one_seed``: what decides a verdict with one seed."""
        args, context = self.args, self.context
        rule = protocol_text(args)[1]
        trained_on = {f"{r.name} seed {r.seed}": r.record().get("trained_on", [NOT_RECORDED]) for r in trained}
        header = run_header(args, [seed for seed, _ in context.seeds], script_command(self.script, self.argv),
                            budget, rule, "", one_seed, trained_on)
        return {"header": header,
                "this_invocation_wall_s": time.time() - self.start, "sentences": context.counts,
                "test_sets": context.test_sets,
                "settings": context.common_settings(),
                "data_commands": [s.shell for s in data_steps]}


def run_and_report(invocation: Invocation, runs: Sequence[ModelRun], extra_langs: Sequence[str],
                   options: Callable[[ModelRun], Dict[str, str]], found: Callable[[dict, int, Path], ModelRun],
                   write: Callable[[RunTable, Sequence[Step]], List[Path]],
                   finish: Callable[[ModelRun], None] = finish_model, missing: Callable[[ModelRun], List[str]] = missing_work) -> None:
    """Refuse results files of other settings; prepare each seed's data and ``finish`` every run
    that lacks something, ``--jobs`` at a time (each job selected by its run's ``options``); then
    ``write`` the results of the finished runs and of every other one ``found`` in the seed
    directories. Nothing is trained with ``--report-only``, nothing written with ``--no-report``."""
    args, context = invocation.args, invocation.context
    refuse_other_settings(runs, invocation.program)
    if args.continue_from and not args.report_only:
        refuse_uncontinuable(runs, Path(args.continue_from).resolve(), invocation.program)
    data_steps: List[Step] = []
    failures: Dict[str, str] = {}
    if not args.report_only:
        for _, directory in context.seeds:
            steps = prepare(args.data, directory, context.test_sets, extra_langs, context.spm_langs, args.spm_vocab,
                            args.workers)
            data_steps = data_steps or steps
        jobs = [Job(f"{r.name}, seed {r.seed}", invocation.job(options(r)), r.eval_dir / "job.log",
                    functools.partial(finish, r)) for r in runs if missing(r)]
        failures = run_jobs(jobs, args.jobs, args.threads)
    if not args.no_report:
        table = survey(runs, context.seeds, lambda r: invocation.resume(options(r)), found, missing)
        print("\n".join(str(path) for path in write(table, data_steps)))
    if failures:
        sys.exit(failures_message(invocation.program, failures))


def main(argv: Optional[Sequence[str]] = None) -> None:
    start = time.time()
    parser = build_parser()
    argv, args = parse_command_line(parser, argv)
    strategies = [s for s in args.models.split(",") if s]
    pairs = [p for p in args.pairs.split(",") if p]
    for name, chosen, known in (("--models", strategies, STRATEGIES), ("--pairs", pairs, PAIRS)):
        unknown = sorted(set(chosen) - set(known))
        if unknown:
            parser.error(f"{name} {','.join(unknown)} unknown; choose from {','.join(known)}")
    models = [Model(s, None) for s in strategies if s == "text-only"]
    models += [Model(s, p) for p in pairs for s in strategies if s != "text-only"]
    context = start_run(args, PROGRAM, pairs)
    earlier = load_earlier_results(parser, args, context.results, lambda folder: earlier_results(
        folder, SUMMARY, read_earlier_summary(folder, SUMMARY, PROGRAM, context.common_settings()), context.test_sets))
    invocation = Invocation(SCRIPT, PROGRAM, parser, argv, args, context, start)

    def model_run(model: Model, seed: int, directory: Path) -> ModelRun:
        return ModelRun(model.name, model, seed, directory, args, context.settings[seed], context.test_sets,
                        context.user_dir)

    def options(one: ModelRun) -> Dict[str, str]:
        return {**seed_option(args, one.seed), "--models": one.model.strategy, "--pairs": one.model.extra or args.pairs}

    def found(record: dict, seed: int, directory: Path) -> ModelRun:
        return model_run(Model(record["strategy"], record["second_source"]), seed, directory)

    def write(table: RunTable, data_steps: Sequence[Step]) -> List[Path]:
        from examples.multimodal_mt.multi30k_results import write_results

        budget = f"{args.max_update} updates of {args.batch_size} sentences per model, {protocol_text(args)[0]}"
        references = {stem: data_file(args.data, stem, TARGET) for stem in context.test_sets}
        kept = None if earlier is None else earlier.without({(r.name, r.seed) for r in table.trained})
        reported = [*table.trained, *([] if kept is None else kept.runs)]
        return write_results(table, context.results, invocation.describe(data_steps, budget, reported), references,
                             kept)

    runs = [model_run(model, seed, directory) for seed, directory in context.seeds for model in models]
    run_and_report(invocation, runs, pairs, options, found, write, missing=skipping_earlier(earlier, missing_work))


if __name__ == "__main__":
    main()
