"""How the real-data recipes run: the options every recipe shares (``--seed``/``--seeds``,
``--jobs``, ``--threads``, ``--precision``, ``--device``, ``--results``, ``--no-report``), the work directory of
each seed, the command lines that resume a run or do one run in a job, and jobs run side by side,
each in its own process with its own log."""
import argparse
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from devtools.recipe_tools import LOG_FORMAT
from devtools.results_file import script_command, script_module

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "amp", "fp32")
DEVICES = ("cpu", "cuda")
REPOSITORY = Path(__file__).resolve().parents[1]


def add_run_options(parser: argparse.ArgumentParser, runs: str, aliases: Optional[Mapping[str, Sequence[str]]] = None,
                    stage_one_seed: bool = False) -> None:
    """The options every recipe shares; ``runs`` names what its jobs are (e.g. "models and seeds"),
    ``aliases`` other spellings of an option (``{"--results": ["--out-dir"]}``), ``stage_one_seed``:
    ``--seed`` is also the seed of a first stage that every seed's runs start from (then it may be
    given with ``--seeds``)."""
    aliases = dict(aliases or {})
    parser.add_argument("--seed", type=int,
                        help="the seed of stage 1, and of stage 2 without --seeds (default 1)" if stage_one_seed else
                        "the one seed of a run without --seeds, its runs in WORK itself (default 1)")
    parser.add_argument("--seeds", type=seed_list,
                        help="comma-separated seeds, e.g. 1,2,3: seed N's runs go to WORK/seed<N>/, laid out as WORK "
                             "is without --seeds")
    parser.add_argument("--jobs", type=int, default=2,
                        help=f"{runs} trained at the same time, each in its own process with --threads torch threads "
                             f"and its own log; 1: one after the other in this process")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each job")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="training arithmetic: amp passes fairseq's --amp (bfloat16 mixed precision on the CPU, "
                             "float16 with loss scaling on a GPU), fp32 does not; auto is amp on a GPU or on a CPU that "
                             "multiplies bfloat16 natively (AVX512-BF16 or AMX: --amp trains 1.4-1.9 times as fast as "
                             "float32 there) and fp32 on any other CPU (--amp runs at about half the speed of float32 "
                             "there); each run records the one chosen. Decoding and evaluation are float32 either way")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where training, decoding and scoring run: cpu (fairseq's --cpu) or cuda (the GPU torch "
                             "sees first, shared by the --jobs)")
    parser.add_argument("--results", *aliases.get("--results", ()), dest="results",
                        help="directory of the results files (default: WORK/results-tables, never the repository's "
                             "committed results unless named)")
    parser.add_argument("--no-report", *aliases.get("--no-report", ()), dest="no_report", action="store_true",
                        help="do the runs, write no results files (what each job of --jobs runs)")


def add_report_only(parser: argparse.ArgumentParser) -> None:
    """``--report-only``, for a recipe that can write its results without training (checked by
    :func:`check_report_only`)."""
    parser.add_argument("--report-only", action="store_true",
                        help="train and decode nothing: write the results from the finished runs, listing the rest "
                             "with the commands that resume them")


def check_report_only(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.report_only and args.no_report:
        parser.error("--report-only and --no-report leave nothing to do; give one of them")


def seed_list(text: str) -> List[int]:
    """``1,2,3`` → [1, 2, 3]; distinct whole numbers, at least one."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated whole numbers, e.g. 1,2,3") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one seed, each once, e.g. 1,2,3")
    return seeds


def check_run_options(parser: argparse.ArgumentParser, args: argparse.Namespace, stage_one_seed: bool = False) -> None:
    """Stop with a usage error on run options that cannot go together (``stage_one_seed`` as for
    :func:`add_run_options`)."""
    if args.jobs < 1 or args.threads < 1:
        parser.error(f"--jobs {args.jobs} --threads {args.threads}: both must be at least 1")
    if args.seeds and args.seed is not None and not stage_one_seed:
        parser.error("give --seed or --seeds, not both")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error(f"--device cuda: torch {torch.__version__} sees no CUDA device; use --device cpu, or a CUDA "
                         f"build of torch on a machine with a GPU")
    if args.precision == "auto":
        args.precision = chosen_precision(args.device)
        logger.info("--precision auto: %s (%s)", args.precision, "a GPU" if args.device == "cuda" else
                    "this CPU multiplies bfloat16 natively" if args.precision == "amp" else
                    "this CPU has no native bfloat16 products")


def chosen_precision(device: str) -> str:
    """What ``--precision auto`` trains with on ``device`` here: amp on a GPU or on a CPU with native
    bfloat16 products, else fp32."""
    from fairseq_ctx.core.mixed_precision import native_bfloat16

    return "amp" if device == "cuda" or native_bfloat16() else "fp32"


def log_to_stdout() -> None:
    """Log records of INFO and above to stdout, as fairseq's tools do (a job's log holds them)."""
    logging.basicConfig(format=LOG_FORMAT, level=logging.INFO, stream=sys.stdout)


def single_seed(args: argparse.Namespace) -> int:
    """``--seed`` (default 1)."""
    return 1 if args.seed is None else args.seed


def seed_dirs(args: argparse.Namespace, work: Path) -> List[Tuple[int, Path]]:
    """(seed, directory) of each seed of the run: with ``--seeds``, ``WORK/seed<N>``; else WORK itself."""
    if args.seeds:
        return [(seed, work / f"seed{seed}") for seed in args.seeds]
    return [(single_seed(args), work)]


def seed_option(args: argparse.Namespace, seed: int) -> Dict[str, str]:
    """The option selecting ``seed``'s directory in a command repeating this run's."""
    return {"--seeds": str(seed)} if args.seeds else {"--seed": str(seed)}


def results_dir(args: argparse.Namespace, work: Path) -> Path:
    return Path(args.results) if args.results else work / "results-tables"


def precision_args(precision: str) -> List[str]:
    """fairseq-train's options for ``precision`` (``auto`` resolved by :func:`check_run_options`)."""
    if precision not in ("amp", "fp32"):
        raise ValueError(f"precision must be amp or fp32 (auto chosen first), got {precision!r}")
    return ["--amp"] if precision == "amp" else []


def device_args(device: str) -> List[str]:
    """The option of fairseq's and the package's tools for ``device``: ``--cpu``, or none (a GPU)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    return ["--cpu"] if device == "cpu" else []


# ---- command lines -------------------------------------------------------------------------------
def edited_argv(parser: argparse.ArgumentParser, argv: Sequence[str], options: Mapping[str, Optional[str]],
                drop: Sequence[str] = ()) -> List[str]:
    """``argv`` without the options of ``drop`` and of ``options`` (any spelling of them), then each
    option of ``options`` with its value (None: a flag). The parser tells how many values each
    option takes."""
    actions = {string: action for action in parser._actions for string in action.option_strings}
    removed = {string for name in [*options, *drop] if name in actions for string in actions[name].option_strings}
    kept: List[str] = []
    at = 0
    while at < len(argv):
        token = argv[at]
        name = token.split("=", 1)[0]
        action = actions.get(name)
        values = 0 if action is None or "=" in token else _value_count(action, argv[at + 1:])
        if name not in removed:
            kept += argv[at:at + 1 + values]
        at += 1 + values
    for name, value in options.items():
        kept += [name] if value is None else [name, value]
    return kept


def _value_count(action: argparse.Action, rest: Sequence[str]) -> int:
    if isinstance(action.nargs, int):
        return action.nargs
    if action.nargs is None:
        return 1
    following = next((i for i, token in enumerate(rest) if token.startswith("--")), len(rest))
    return min(following, 1) if action.nargs == "?" else following


def repository_on_path() -> Dict[str, str]:
    """This process's environment with the repository first on PYTHONPATH: a child runs a recipe as
    ``python -m examples...`` whatever its working directory."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), *filter(None, [os.environ.get("PYTHONPATH")])])}


def resume_command(parser: argparse.ArgumentParser, script: str, argv: Sequence[str],
                   options: Mapping[str, Optional[str]], drop: Sequence[str] = ()) -> str:
    """What a reader runs to resume one run of the command ``script argv`` (``script`` relative to
    the repository root): that command with ``options`` set (the run's seed, its models) and
    without ``drop``."""
    return script_command(script, edited_argv(parser, argv, options, ["--no-report", *drop]))


def job_command(parser: argparse.ArgumentParser, script: str, argv: Sequence[str],
                options: Mapping[str, Optional[str]], drop: Sequence[str] = ()) -> Tuple[str, ...]:
    """The command of a job doing one run of ``script argv`` in its own process: the run's
    :func:`resume_command` with this Python, one job and no results files."""
    return (sys.executable, "-m", script_module(script),
            *edited_argv(parser, argv, {**options, "--jobs": "1", "--no-report": None}, drop))


# ---- jobs side by side ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One run: ``command`` does it in its own process (the recipe restricted to the run), its
    output appended to ``log``; ``here`` does it in this process."""

    name: str
    command: Tuple[str, ...]
    log: Path
    here: Callable[[], None]


def run_jobs(jobs: Sequence[Job], parallel: int, threads: int, poll_s: float = 0.5) -> Dict[str, str]:
    """Run every job, ``parallel`` at a time in their own processes with ``threads`` torch threads
    each (one job, or ``parallel`` 1: one after the other in this process); returns ``{job name:
    why it failed}`` (a failed job stops no other). An interrupt stops the running jobs."""
    if parallel == 1 or len(jobs) <= 1:
        return _run_here(jobs, threads)
    env = {**repository_on_path(), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    pending, running, failed = list(jobs), [], {}
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.pop(0)
                job.log.parent.mkdir(parents=True, exist_ok=True)
                log = open(job.log, "a", encoding="utf-8")
                logger.info("%s: started (log: %s)", job.name, job.log)
                running.append((job, subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=env), log))
            time.sleep(poll_s)
            for entry in [e for e in running if e[1].poll() is not None]:
                job, process, log = entry
                log.close()
                running.remove(entry)
                if process.returncode == 0:
                    logger.info("%s: done (log: %s)", job.name, job.log)
                else:
                    failed[job.name] = f"exit {process.returncode}, see {job.log}"
                    logger.error("%s failed: %s", job.name, failed[job.name])
    finally:
        for job, process, log in running:
            process.terminate()
            process.wait()
            log.close()
    return failed


def _run_here(jobs: Sequence[Job], threads: int) -> Dict[str, str]:
    import torch

    torch.set_num_threads(threads)
    failed = {}
    for job in jobs:
        start = time.time()
        try:
            job.here()
        except Exception as error:  # one failed run does not stop the others
            logger.exception("%s failed", job.name)
            failed[job.name] = f"{type(error).__name__}: {error}"
        else:
            logger.info("%s: done in %.1f min", job.name, (time.time() - start) / 60)
    return failed


def failures_message(program: str, failed: Mapping[str, str]) -> str:
    """The error a recipe ends with when runs failed."""
    return (f"{program}: error: {len(failed)} run(s) failed: " + "; ".join(f"{name} ({why})" for name, why in
                                                                          failed.items())
            + "; the results list them with the command that resumes each")
