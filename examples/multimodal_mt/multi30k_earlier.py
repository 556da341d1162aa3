"""Runs of a Multi30k MT recipe known only from a results folder it wrote before (``--earlier-results``),
for when their work directory is gone. The folder's summary JSON keeps each run's results file and
``hypotheses/`` its test translations (and, for a multi-source model, those decoded with the second
source shuffled; for averaged checkpoints, those of every validation curve point). Reported next to
the runs of this work directory, they make up the seeds a new run does not train again: every
BLEU and chrF is computed again from the kept hypotheses; what needs the checkpoints (a test set
the folder does not hold) cannot be had. Used by multi30k_multisource.py and the CKA recipe."""
import argparse
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple

from devtools.machine_facts import MachineFacts
from devtools.recipe_report import EARLIER_TIMES
from devtools.recipe_tools import read_json
from examples.multimodal_mt.multi30k_evaluation import hypotheses_name, read_lines, run_scores, test_scores
from examples.multimodal_mt.multi30k_runs import Model, ModelRun, decoded_test_sets, different_settings


@dataclass
class EarlierRun:
    """One finished run of an earlier results folder: its results file (``saved``), the folder
    holding its hypotheses, and the curve hypotheses that folder lists for it."""

    name: str
    seed: int
    saved: dict
    folder: Path
    curve_hypotheses: List[str] = field(default_factory=list)

    @property
    def model(self) -> Model:
        return Model(self.saved.get("strategy", "text-only"), self.saved.get("second_source"))

    def record(self) -> dict:
        return self.saved

    def kept_hypotheses(self, stem: str, out_dir: Path, shuffled: bool = False) -> Optional[List[str]]:
        """Its hypotheses of test set ``stem`` (``shuffled``: decoded with the second source
        shuffled), copied into ``out_dir`` and read as sacreBLEU reads them; None when the folder
        has no such file."""
        name = hypotheses_name(self.name, self.seed, stem, shuffled)
        if not (self.folder / name).is_file():
            return None
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.folder / name, out_dir / name)
        return read_lines(out_dir / name)

    def copy_curve_hypotheses(self, out_dir: Path) -> List[str]:
        """Copy the hypotheses of its validation curve points into ``out_dir``; returns their names."""
        for name in self.curve_hypotheses:
            (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.folder / name, out_dir / name)
        return list(self.curve_hypotheses)


@dataclass
class EarlierResults:
    """The runs taken from an earlier results folder, and where, when, on what and by which command
    that folder was written (for the results files)."""

    folder: Path
    date: str
    machine: str
    command: str
    runs: List[EarlierRun]

    def without(self, have: Collection[Tuple[str, int]]) -> "EarlierResults":
        """The same without the runs of ``have`` ((name, seed) pairs reported from a work directory)."""
        return EarlierResults(self.folder, self.date, self.machine, self.command,
                              [r for r in self.runs if (r.name, r.seed) not in have])

    def as_dict(self) -> Dict[str, object]:
        return {"folder": str(self.folder), "date": self.date, "machine": self.machine, "command": self.command,
                "runs": [f"{r.name}/seed{r.seed}" for r in self.runs]}


def read_earlier_summary(folder: Path, summary_name: str, written_by: str, settings: Dict[str, object]) -> dict:
    """The summary JSON ``summary_name`` of the results folder ``folder``. Raises ``ValueError``
    naming the file and the difference when it is missing or was written with other training
    ``settings`` (without the seed)."""
    path = folder / summary_name
    summary = read_json(path)
    if summary is None:
        raise ValueError(f"--earlier-results {folder}: no {summary_name} there; give a folder {written_by} wrote")
    changed = different_settings(summary["settings"], settings)
    if changed:
        raise ValueError(f"{path} was written by runs with other settings ({'; '.join(changed)}); its runs cannot "
                         f"be reported with these")
    return summary


def earlier_results(folder: Path, summary_name: str, summary: dict, test_sets: Sequence[str],
                    make_run: Callable[[str, int, dict, Path, List[str]], EarlierRun] = EarlierRun) -> EarlierResults:
    """The runs of ``summary`` (read from ``folder / summary_name``), each made by ``make_run``.
    Raises ``ValueError`` naming the missing file when a hypotheses file the summary reports from
    (a test set of ``test_sets``, its shuffled decoding, a curve point) is not in the folder."""
    path = folder / summary_name
    curves = summary.get("curve_hypotheses", {})
    runs = []
    for key, record in summary["runs"].items():
        run = make_run(record["name"], record["settings"]["seed"], record, folder, curves.get(key, []))
        needed = list(run.curve_hypotheses)
        for stem in set(test_sets) & set(decoded_test_sets(record)):
            needed.append(hypotheses_name(run.name, run.seed, stem))
            if run.model.extra is not None:
                needed.append(hypotheses_name(run.name, run.seed, stem, shuffled=True))
        for name in needed:
            if not (folder / name).is_file():
                raise ValueError(f"{folder / name} is missing: {path} reports {run.name}, seed {run.seed} from it")
        runs.append(run)
    return EarlierResults(folder, summary["date"], MachineFacts(**summary["machine"]).describe(), summary["command"],
                          sorted(runs, key=lambda r: (r.seed, r.name)))


def add_earlier_results_option(parser: argparse.ArgumentParser, summary_name: str) -> None:
    parser.add_argument("--earlier-results", metavar="FOLDER",
                        help=f"a results folder this recipe wrote before ({summary_name}, hypotheses/) whose work "
                             "directory is gone: its runs that --work has no results file for are reported with this "
                             "run's and not trained again (the same settings are required)")


def load_earlier_results(parser: argparse.ArgumentParser, args: argparse.Namespace, results: Path,
                         read: Callable[[Path], EarlierResults]) -> Optional[EarlierResults]:
    """The runs of ``--earlier-results`` (``read`` reads them), None without it; a parser error when
    that folder is the ``results`` folder or ``read`` refuses it."""
    if not args.earlier_results:
        return None
    if Path(args.earlier_results).resolve() == results:
        parser.error(f"--results {results} is the --earlier-results folder, which the tables are made from; "
                     f"write them to another folder")
    try:
        return read(Path(args.earlier_results))
    except ValueError as error:
        parser.error(str(error))


def skipping_earlier(earlier: Optional[EarlierResults],
                     missing: Callable[[ModelRun], List[str]]) -> Callable[[ModelRun], List[str]]:
    """``missing``, but nothing for a run the earlier results report (unless this work directory
    has its results file): such runs are not trained again."""
    reported = set() if earlier is None else {(r.name, r.seed) for r in earlier.runs}
    return lambda one: [] if (one.name, one.seed) in reported and one.record() is None else missing(one)


def score_earlier(runs: Sequence[EarlierRun], stem: str, references: Sequence[str], out_dir: Path,
                  scores: Dict[str, Dict[int, dict]], hypotheses: Dict[str, Dict[int, List[str]]]) -> None:
    """Add the scores and hypotheses of the ``runs`` decoded on ``stem`` (from their kept
    hypotheses, copied into ``out_dir``) to ``scores`` and ``hypotheses`` as score_decoded gives them."""
    for run in runs:
        if stem not in decoded_test_sets(run.record()):
            continue
        lines = run.kept_hypotheses(stem, out_dir)
        result = run_scores(run.record(), stem, lines, references, hypotheses_name(run.name, run.seed, stem))
        attacked_lines = run.kept_hypotheses(stem, out_dir, shuffled=True)
        if attacked_lines is not None:
            attacked = test_scores(attacked_lines, references)
            result.update(bleu_shuffled=attacked["bleu"], chrf_shuffled=attacked["chrf"],
                          bleu_drop=result["bleu"] - attacked["bleu"],
                          shuffled_hypotheses=hypotheses_name(run.name, run.seed, stem, shuffled=True))
        scores.setdefault(run.name, {})[run.seed] = result
        hypotheses.setdefault(run.name, {})[run.seed] = lines


def earlier_lines(earlier: Optional[EarlierResults], also: str = "") -> List[str]:
    """The paragraph naming the runs taken from an earlier results folder, and how it was made;
    ``also``: what else of theirs is taken as recorded there."""
    if earlier is None or not earlier.runs:
        return []
    runs = ", ".join(f"{r.name} seed {r.seed}" for r in earlier.runs)
    return [f"Runs reported from an earlier results folder (`--earlier-results {earlier.folder}`; their work directory "
            f"is gone): {runs}. Their scores are computed again from the hypotheses kept there (copied into this "
            f"table's hypotheses/){also}. That folder was written {earlier.date} on {earlier.machine}, by "
            f"`{earlier.command}`; {EARLIER_TIMES}.", ""]
