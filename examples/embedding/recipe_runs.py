"""What the real-data recipes share: the seeds of a run and their work directories, the training
precision, a plateau rule fixed before a run and the chunked training it ends, mean ± sd and a
paired t-test over seeds, runs trained side by side in separate processes (one log each), and
plots drawn only where matplotlib is installed.

The recipes of examples/embedding and examples/context_mt import it from this folder."""
import argparse
import logging
import math
import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

PRECISIONS = ("fp32", "amp")
SIGNIFICANCE = 0.05  # two-sided p below which a difference over seeds counts as more than chance
HELD, NOT_HELD, UNDECIDED = "held", "did not hold", "undecided"


# ---- options -------------------------------------------------------------------------------------
def add_run_options(parser: argparse.ArgumentParser, runs: str, results_aliases: Sequence[str] = ()) -> None:
    """``--seeds``, ``--jobs``, ``--threads``, ``--precision`` and ``--results`` (also spelt
    ``results_aliases``); ``runs`` names what the jobs are (e.g. "models and seeds")."""
    parser.add_argument("--seeds", type=seed_list,
                        help="comma-separated seeds (e.g. 1,2,3): each seed's runs go to WORK/seed<N>/, laid out as a "
                             "single-seed work directory; without it, --seed and WORK itself")
    parser.add_argument("--jobs", type=int, default=2,
                        help=f"{runs} trained at the same time, each in its own process with its own log")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each job")
    parser.add_argument("--precision", choices=PRECISIONS, default="amp",
                        help="amp: fairseq's --amp (mixed precision: bf16 autocast on the CPU); fp32: none")
    parser.add_argument("--results", *results_aliases, dest="results",
                        help="directory of the results files (default: WORK/results, outside the repository's "
                             "committed results)")


def seed_list(text: str) -> List[int]:
    """``1,2,3`` → [1, 2, 3]; distinct whole numbers, at least one."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated whole numbers, e.g. 1,2,3") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one seed, each once, e.g. 1,2,3")
    return seeds


def check_run_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.jobs < 1 or args.threads < 1:
        parser.error(f"--jobs {args.jobs} --threads {args.threads}: both must be at least 1")


def seeds_of(args: argparse.Namespace) -> List[int]:
    return args.seeds if args.seeds else [args.seed]


def seed_work(work: Path, seed: int, seeded: bool) -> Path:
    """Where the runs of ``seed`` live: ``WORK/seed<N>`` with --seeds, WORK itself without."""
    return work / f"seed{seed}" if seeded else work


def seed_options(seed: int, seeded: bool) -> List[str]:
    """The command-line options that select one seed's directory."""
    return ["--seeds", str(seed)] if seeded else ["--seed", str(seed)]


def results_dir(args: argparse.Namespace, work: Path) -> Path:
    return Path(args.results) if args.results else work / "results"


def passed_on(args: argparse.Namespace, skip: Sequence[str]) -> List[str]:
    """``--option value`` for every setting of ``args`` except ``skip`` (destinations, each spelt
    ``--dest-with-dashes`` on the command line) and unset ones: what a job's command repeats of
    the command that started it. Only single values can be passed on; skip the others."""
    options = []
    for dest, value in vars(args).items():
        if dest in skip or value is None:
            continue
        if isinstance(value, (bool, list, tuple)):
            raise ValueError(f"{dest} = {value!r} cannot be passed on as --option value; skip it and pass it "
                             f"explicitly")
        options += [f"--{dest.replace('_', '-')}", str(value)]
    return options


def precision_args(precision: str) -> List[str]:
    """fairseq-train's options for ``precision``."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return ["--amp"] if precision == "amp" else []


# ---- convergence ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    """What the plateau rule says about a validation curve."""

    plateaued: bool
    text: str


@dataclass(frozen=True)
class PlateauRule:
    """A training has converged when the best validation value of the last fifth of its updates
    improves on the best value before by less than ``min_gain`` (absolute), judged from the
    ``min_points``-th validation on (validations at equal intervals)."""

    metric: str
    min_gain: float
    higher_is_better: bool
    tail: float = 0.2
    min_points: int = 5

    def describe(self, every: int, budget: int) -> str:
        best = "highest" if self.higher_is_better else "lowest"
        return (f"{self.metric} every {every} updates; converged (plateau) when the {best} value of the last fifth of "
                f"the updates improves on the {best} before by less than {self.min_gain:g} absolute, judged from the "
                f"{self.min_points}th validation on; otherwise training stops at the budget of {budget} updates")

    def judge(self, curve: Sequence[Tuple[int, float]]) -> Judgement:
        """``curve``: [(updates, value), …] in update order."""
        if len(curve) < self.min_points:
            return Judgement(False, f"{len(curve)} validation(s), fewer than the {self.min_points} the rule needs")
        last = curve[-1][0]
        start = last - round(self.tail * last)
        before = [value for updates, value in curve if updates <= start]
        tail = [value for updates, value in curve if updates > start]
        best = max if self.higher_is_better else min
        gain = (best(tail) - best(before)) * (1 if self.higher_is_better else -1)
        plateaued = gain < self.min_gain
        state = (f"plateau (gain under {self.min_gain:g})" if plateaued
                 else f"still improving ({self.min_gain:g} or more)")
        return Judgement(plateaued, f"best {best(before):.2f} up to update {start}, best {best(tail):.2f} in updates "
                                    f"{start + 1}–{last} (gain {gain:+.2f}): {state}")


def train_until_plateau(rule: PlateauRule, every: int, budget: int, curve: List[Tuple[int, float]],
                        train_to: Callable[[int], None], validate: Callable[[int], float],
                        record: Callable[[List[Tuple[int, float]]], None]) -> str:
    """Train in chunks of ``every`` updates up to ``budget``, validating after each, until ``rule``
    finds a plateau; ``curve`` holds the validations of earlier sessions (resumed, not redone).
    ``train_to(updates)`` trains up to that update, ``validate(updates)`` returns the value there,
    ``record(curve)`` saves the curve after each validation. Returns "plateau" or "budget"."""
    while True:
        if rule.judge(curve).plateaued:
            return "plateau"
        done = curve[-1][0] if curve else 0
        if done >= budget:
            return "budget"
        target = min(done + every, budget)
        train_to(target)
        curve.append((target, validate(target)))
        record(curve)


def checkpoint_updates(path: Path) -> int:
    """The updates a fairseq checkpoint was saved at (0 when there is none)."""
    if not path.exists():
        return 0
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)
    return int(state["optimizer_history"][-1]["num_updates"])


# ---- statistics over seeds -----------------------------------------------------------------------
def mean_sd(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def format_mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """``12.34 ± 0.56`` over several values, ``12.34`` for one."""
    mean, sd = mean_sd(values)
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


@dataclass(frozen=True)
class SeedTest:
    """Paired two-sided Student t-test over seeds of the differences a − b (one per seed, the
    two runs of a seed sharing initialisation and batch order); ``p`` is None for one seed."""

    differences: Tuple[float, ...]
    mean: float
    sd: float
    p: Optional[float]

    def verdict(self, expect_positive: bool) -> str:
        """held / did not hold (p < 0.05 in / against the expected direction) / undecided; with one
        seed the point difference decides, marked as untested."""
        agrees = self.mean > 0 if expect_positive else self.mean < 0
        if self.p is None:
            return f"{HELD if agrees else NOT_HELD} (one seed, untested)"
        if self.p >= SIGNIFICANCE or self.mean == 0:
            return UNDECIDED
        return HELD if agrees else NOT_HELD

    def describe(self, digits: int = 2, test: str = "paired t-test") -> str:
        """``+1.23 ± 0.45, paired t-test over 3 seeds p = 0.012`` (``test`` names the test)."""
        spread = f" ± {self.sd:.{digits}f}" if len(self.differences) > 1 else ""
        p = "" if self.p is None else f", {test} over {len(self.differences)} seeds p = {self.p:.3f}"
        return f"{self.mean:+.{digits}f}{spread}{p}"


def paired_t_test(differences: Sequence[float]) -> SeedTest:
    mean, sd = mean_sd(differences)
    n = len(differences)
    if n < 2:
        return SeedTest(tuple(differences), mean, sd, None)
    if sd == 0:
        return SeedTest(tuple(differences), mean, sd, 1.0 if mean == 0 else 0.0)
    t = mean / (sd / math.sqrt(n))
    return SeedTest(tuple(differences), mean, sd, student_t_two_sided_p(t, n - 1))


def student_t_two_sided_p(t: float, df: int) -> float:
    """P(|T| ≥ |t|) for Student's t with ``df`` degrees of freedom: I_x(df/2, 1/2), x = df/(df+t²)."""
    return regularized_beta(df / (df + t * t), df / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (Press et al., Numerical Recipes, §6.4)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300

    def guard(value: float) -> float:
        return value if abs(value) > tiny else tiny

    c, d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1))
    fraction = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / guard(1.0 + numerator * d)
            c = guard(1.0 + numerator / c)
            fraction *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return fraction


# ---- jobs side by side ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One run in its own process: its name, command line and the log its output is appended to."""

    name: str
    command: Tuple[str, ...]
    log: Path


def run_jobs(jobs: Sequence[Job], parallel: int, threads: int, poll_s: float = 0.5) -> List[Job]:
    """Run ``jobs``, at most ``parallel`` at a time, each with ``threads`` torch threads and its
    stdout and stderr appended to its own log (so logs never interleave); returns the failed jobs.
    An interrupt stops the running jobs."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    pending, running, failed = list(jobs), [], []
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.pop(0)
                job.log.parent.mkdir(parents=True, exist_ok=True)
                log = open(job.log, "a", encoding="utf-8")
                print(f"== start {job.name} (log {job.log})", flush=True)
                running.append((job, subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=env), log))
            time.sleep(poll_s)
            for entry in [e for e in running if e[1].poll() is not None]:
                job, process, log = entry
                log.close()
                running.remove(entry)
                print(f"== {job.name}: " + ("done" if process.returncode == 0 else
                                            f"FAILED (exit {process.returncode}), see {job.log}"), flush=True)
                if process.returncode != 0:
                    failed.append(job)
    finally:
        for job, process, log in running:
            process.terminate()
            process.wait()
            log.close()
    return failed


# ---- plots ---------------------------------------------------------------------------------------
def plot_if_possible(draw: Callable[[], None], path: Path) -> bool:
    """Call ``draw`` (which writes ``path``) when matplotlib is installed; otherwise say so once
    and write nothing. The tables and their text files are complete without the plot."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed, so {path.name} was not drawn (pip install -e '.[plots]'); "
              f"the results tables are complete without it", flush=True)
        return False
    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    draw()
    return True
