"""Runs of multi30k_embedding.py known only from a results folder it wrote before (``--earlier-results``),
for when their work directory is gone: ``multi30k_embedding.json`` keeps each run's ``run.json``
(updates, validation curve, convergence, command) and ``multi30k_embedding.errors.tsv`` every wrong
retrieval of every direction. Reported next to the runs of this work directory, they make up the
seeds a new run does not train again: each error count and percentage is recomputed from the kept
wrong retrievals. Their checkpoints are gone with the work directory, so they cannot be scored on a
test set their folder does not hold."""
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Dict, List, Mapping, Sequence, Tuple

from devtools.machine_facts import MachineFacts
from devtools.recipe_tools import read_json
from examples.embedding.multi30k_report import STEM, read_errors_tsv

SUMMARY = f"{STEM}.json"
ERRORS = f"{STEM}.errors.tsv"


@dataclass
class EarlierEmbeddings:
    """The runs taken from an earlier results folder (``runs``: {model: {seed: run.json}}, ``rows``:
    their retrieval rows with the wrong retrievals), and where, when, on what and by which command
    that folder was written."""

    folder: Path
    date: str
    machine: str
    command: str
    runs: Dict[str, Dict[int, dict]]
    rows: List[dict]

    def keys(self) -> List[Tuple[str, int]]:
        return [(name, seed) for name, by_seed in self.runs.items() for seed in by_seed]

    def without(self, have: Collection[Tuple[str, int]]) -> "EarlierEmbeddings":
        """The same without the runs of ``have`` ((model, seed) pairs reported from a work directory)."""
        runs = {name: {seed: run for seed, run in by_seed.items() if (name, seed) not in have}
                for name, by_seed in self.runs.items()}
        return EarlierEmbeddings(self.folder, self.date, self.machine, self.command,
                                 {name: by_seed for name, by_seed in runs.items() if by_seed},
                                 [row for row in self.rows if (row["model"], row["seed"]) not in have])

    def as_dict(self) -> Dict[str, object]:
        return {"folder": str(self.folder), "date": self.date, "machine": self.machine, "command": self.command,
                "runs": [f"{name}/seed{seed}" for name, seed in self.keys()]}


def read_earlier_results(folder: Path, settings: Mapping[str, object], precision: str,
                         test_sets: Sequence[str]) -> EarlierEmbeddings:
    """The runs of the results folder ``folder``, their rows recomputed from its errors.tsv. Raises
    ``ValueError`` naming the file and the difference when the folder was written with other
    ``settings`` (size, budget, validation, vocabulary, k) or ``precision``, lacks one of
    ``test_sets`` for one of its runs, or its two files disagree."""
    path = folder / SUMMARY
    summary = read_json(path)
    if summary is None:
        raise ValueError(f"--earlier-results {folder}: no {SUMMARY} there; give a folder multi30k_embedding.py wrote")
    changed = [f"{key} {summary['settings'].get(key)!r} there, {value!r} here" for key, value in settings.items()
               if summary["settings"].get(key) != value]
    if summary["precision"] != precision:
        changed.append(f"precision {summary['precision']!r} there, {precision!r} here")
    if changed:
        raise ValueError(f"{path} was written by runs with other settings ({'; '.join(changed)}); its runs cannot "
                         f"be reported with these")
    kept = read_errors_tsv(folder / ERRORS)
    runs = {name: {int(seed): run for seed, run in by_seed.items()} for name, by_seed in summary["runs"].items()}
    rows = []
    for row in summary["rows"]:
        if row["test_set"] not in test_sets:
            continue
        key = (row["model"], row["seed"], row["test_set"], row["src"], row["tgt"])
        if key not in kept:
            raise ValueError(f"{folder / ERRORS} has no line for {' '.join(map(str, key))}, which {path} reports")
        total, wrong = kept[key]
        rows.append({**row, "errors": len(wrong), "total": total, "error_percent": 100.0 * len(wrong) / total,
                     "wrong": wrong})
    for name, by_seed in runs.items():
        for seed in by_seed:
            scored = {row["test_set"] for row in rows if (row["model"], row["seed"]) == (name, seed)}
            for test_set in test_sets:
                if test_set not in scored:
                    raise ValueError(f"{path} has no {test_set} results for {name}, seed {seed}, and its checkpoints "
                                     f"are gone: leave that test set out, or train that seed again in --work")
    return EarlierEmbeddings(folder, summary["date"], MachineFacts(**summary["machine"]).describe(),
                             summary["command"], runs, rows)
