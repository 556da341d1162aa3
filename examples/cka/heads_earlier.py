"""Runs of multi30k_heads.py known only from a results folder it wrote before (``--earlier-results``),
for when their work directory is gone: ``multi30k_heads.json`` keeps each run's results file and
the head similarity its analysis measured, ``hypotheses/`` its test translations. Reported next to
the runs of this work directory, they make up the seeds a new run does not train again: every
BLEU and chrF is computed again from the kept hypotheses, the similarity is the recorded one (the
checkpoints it was measured on are gone with the work directory)."""
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Dict, List, Optional, Sequence, Tuple

from devtools.machine_facts import MachineFacts
from devtools.recipe_tools import read_json
from multi30k_evaluation import hypotheses_name, read_lines
from multi30k_runs import Model, decoded_test_sets, different_settings

SUMMARY = "multi30k_heads.json"


@dataclass
class EarlierRun:
    """One finished run of an earlier results folder: its results file (``record``), its head
    similarity (None where it was not analysed with this run's analysis settings) and its kept
    hypotheses."""

    name: str
    seed: int
    saved: dict
    similarity: Optional[dict]
    folder: Path
    model: Model = field(default_factory=lambda: Model("text-only", None))

    def record(self) -> dict:
        return self.saved

    def kept_hypotheses(self, stem: str, out_dir: Path) -> List[str]:
        """Its hypotheses of test set ``stem``, copied into ``out_dir`` and read as sacreBLEU reads them."""
        target = out_dir / hypotheses_name(self.name, self.seed, stem)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.folder / hypotheses_name(self.name, self.seed, stem), target)
        return read_lines(target)

    @property
    def picture(self) -> Path:
        """Its head × head CKA heatmap in the earlier folder (there if matplotlib was)."""
        return self.folder / f"heads_{self.name}.seed{self.seed}.png"


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


def read_earlier_results(folder: Path, settings: Dict[str, object], analysis: Dict[str, int],
                         test_sets: Sequence[str]) -> EarlierResults:
    """The runs of the results folder ``folder``. Raises ``ValueError`` naming the file and the
    difference when the folder was written with other training ``settings`` (without the seed)
    or ``analysis`` settings, or lacks the hypotheses of one of ``test_sets`` that one of its runs
    was decoded on."""
    path = folder / SUMMARY
    summary = read_json(path)
    if summary is None:
        raise ValueError(f"--earlier-results {folder}: no {SUMMARY} there; give a folder multi30k_heads.py wrote")
    changed = different_settings(summary["settings"], settings)
    if changed:
        raise ValueError(f"{path} was written by runs with other settings ({'; '.join(changed)}); its runs cannot "
                         f"be reported with these")
    if summary["analysis"] != analysis:
        raise ValueError(f"{path}: its head analysis used {summary['analysis']}, this run {analysis} "
                         f"(--max-positions, --analysis-batch-size); give the same")
    similarity = {(row["name"], int(seed)): entry for row in summary["similarity"]
                  for seed, entry in row["per_seed"].items()}
    runs = []
    for record in summary["runs"].values():
        key = (record["name"], record["settings"]["seed"])
        run = EarlierRun(*key, record, similarity.get(key), folder)
        for stem in set(test_sets) & set(decoded_test_sets(record)):
            kept = folder / hypotheses_name(run.name, run.seed, stem)
            if not kept.is_file():
                raise ValueError(f"{kept} is missing: {path} reports {run.name}, seed {run.seed} on {stem} from it")
        runs.append(run)
    return EarlierResults(folder, summary["date"], MachineFacts(**summary["machine"]).describe(), summary["command"],
                          sorted(runs, key=lambda r: (r.seed, r.name)))
