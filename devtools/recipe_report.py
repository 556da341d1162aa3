"""What every results file of the real-data recipes states about its runs, in the same words and
order: date, machine (and any other machine a run's log says it trained on), precision, seeds,
budgets, the convergence rule and its outcome, the command and the verdict rule at the top; every
unfinished run with the command that resumes it at the end; plots only where matplotlib is
installed."""
import argparse
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from devtools.machine_facts import MachineFacts, this_machine, utc_now
from devtools.seed_statistics import verdict_rule
from devtools.train_log import NOT_RECORDED
from fairseq_ctx.core.plots import PLOTS_INSTALL, plots_available

PRECISION = {("amp", "cpu"): "amp (training under fairseq's --amp: bfloat16 mixed precision on the CPU; decoding "
                             "and evaluation in float32)",
             ("amp", "cuda"): "amp (training under fairseq's --amp: float16 mixed precision with dynamic loss scaling "
                              "on the GPU; decoding and evaluation in float32 on the GPU)",
             ("fp32", "cpu"): "fp32 (float32 throughout)",
             ("fp32", "cuda"): "fp32 (float32 throughout, on the GPU)"}
PLOT_MISSING = "plot {name} skipped: matplotlib is not installed (" + PLOTS_INSTALL + "); the tables are complete without it"
EARLIER_TIMES = ("their wall times are of the machines that trained them, which need not be that one (a folder "
                 "written from earlier results keeps their runs' times, not their machines)")
"""What a table reporting runs from an earlier results folder says of those runs' wall times."""


@dataclass
class RunHeader:
    """The facts at the top of a results file; ``as_dict`` is their JSON form."""

    command: str
    precision: str
    seeds: List[int]
    jobs: int
    threads: int
    budget: str
    convergence_rule: str
    convergence: str
    one_seed: str = "the point estimate decides, marked untested"
    device: str = "cpu"
    date: str = field(default_factory=utc_now)
    machine: Dict[str, object] = field(default_factory=dict)
    trained_on: Dict[str, List[str]] = field(default_factory=dict)
    """Per run, the machines its training log records (:func:`devtools.train_log.training_machines`)."""

    def lines(self) -> List[str]:
        """Markdown bullets, one fact each."""
        return [f"- Date: {self.date}",
                f"- Machine: {MachineFacts(**self.machine).describe()}; {self.jobs} job(s) side by side",
                trained_on_line(self.trained_on, MachineFacts(**self.machine).describe()),
                f"- Precision: {PRECISION[self.precision, self.device]}",
                f"- Seeds: {', '.join(map(str, self.seeds))}",
                f"- Budget: {self.budget}",
                f"- Convergence rule (fixed before the runs): {self.convergence_rule}",
                f"- Convergence: {self.convergence}",
                f"- Command: `{self.command}`",
                f"- {verdict_rule(self.one_seed)}"]

    def as_dict(self) -> Dict[str, object]:
        return {**asdict(self), "verdict_rule": verdict_rule(self.one_seed)}


def trained_on_line(trained_on: Mapping[str, Sequence[str]], machine: str) -> str:
    """Where the runs trained: the header's ``machine`` unless a run's log records others (a run
    resumed on another machine, or with other threads), which are named with their runs."""
    elsewhere: Dict[str, List[str]] = {}
    for run, machines in trained_on.items():
        if list(machines) != [machine]:
            elsewhere.setdefault(" then ".join(machines) or NOT_RECORDED, []).append(run)
    if not elsewhere:
        return "- Trained on: the machine above (every run, as its training log records)"
    return "- Trained on: the machine above, except " + "; ".join(
        f"{', '.join(runs)}: {machines}" for machines, runs in elsewhere.items())


def run_header(args: argparse.Namespace, seeds: Sequence[int], command: str, budget: str, convergence_rule: str,
               convergence: str, one_seed: Optional[str] = None,
               trained_on: Optional[Mapping[str, Sequence[str]]] = None) -> RunHeader:
    """The header of a run started with ``args`` (their ``--precision``, ``--device``, ``--jobs`` and
    ``--threads``) on this machine now; ``trained_on``: per run, the machines its log records."""
    header = RunHeader(command, args.precision, list(seeds), args.jobs, args.threads, budget, convergence_rule,
                       convergence, device=args.device, machine=this_machine(torch_threads=args.threads).as_dict(),
                       trained_on={run: list(machines) for run, machines in (trained_on or {}).items()})
    if one_seed is not None:
        header.one_seed = one_seed
    return header


def facts_lines(command: str, precision: str, *facts: str) -> List[str]:
    """Date, machine, precision, any further ``facts`` and the command, as Markdown bullets: the header
    of a results file written by a script that is not a recipe run."""
    return [f"- date: {utc_now()}", f"- machine: {this_machine().describe()}", f"- precision: {precision}",
            *[f"- {fact}" for fact in facts], f"- command: `{command}`"]


def unfinished_run(name: str, seed: int, state: str, command: str) -> Dict[str, object]:
    """A run that lacks something, as the results files list it."""
    return {"name": name, "seed": seed, "state": state, "command": command}


def unfinished_lines(unfinished: Sequence[Dict[str, object]]) -> List[str]:
    """The section listing every unfinished run with the command that resumes it."""
    lines = ["## Unfinished runs", ""]
    if not unfinished:
        return lines + ["None: every requested run has all its results."]
    lines += ["The tables above report what these runs have; each command resumes one, skipping what is done:", ""]
    return lines + [f"- {item['name']}, seed {item['seed']}: {item['state']}; resume: `{item['command']}`"
                    for item in unfinished]


def plot_if_possible(draw: Callable[[], None], path: Path) -> bool:
    """Call ``draw`` (which writes ``path``, drawing with :func:`fairseq_ctx.core.plots.pyplot`) when
    matplotlib is installed; otherwise say so and write nothing."""
    if not plots_available():
        logging.getLogger(__name__).warning(PLOT_MISSING.format(name=path.name))
        return False
    draw()
    return True
