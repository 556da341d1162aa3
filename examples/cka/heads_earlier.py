"""Runs of multi30k_heads.py known only from a results folder it wrote before (``--earlier-results``,
multi30k_earlier.py): besides their kept hypotheses, ``multi30k_heads.json`` keeps the head
similarity its analysis measured, which is reported as recorded (the checkpoints it was measured
on are gone with the work directory)."""
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from examples.multimodal_mt.multi30k_earlier import EarlierResults, EarlierRun, earlier_results, read_earlier_summary

SUMMARY = "multi30k_heads.json"


@dataclass
class EarlierHeadsRun(EarlierRun):
    """An earlier run with its head similarity (None where it was not analysed with this run's
    analysis settings)."""

    similarity: Optional[dict] = None

    @property
    def picture(self) -> Path:
        """Its head × head CKA heatmap in the earlier folder (there if matplotlib was)."""
        return self.folder / f"heads_{self.name}.seed{self.seed}.png"


def read_earlier_results(folder: Path, settings: Dict[str, object], analysis: Dict[str, int],
                         test_sets: Sequence[str]) -> EarlierResults:
    """The runs of the results folder ``folder``. Raises ``ValueError`` naming the file and the
    difference when the folder was written with other training ``settings`` (without the seed)
    or ``analysis`` settings, or lacks the hypotheses of one of ``test_sets`` that one of its runs
    was decoded on."""
    summary = read_earlier_summary(folder, SUMMARY, "multi30k_heads.py", settings)
    if summary["analysis"] != analysis:
        raise ValueError(f"{folder / SUMMARY}: its head analysis used {summary['analysis']}, this run {analysis} "
                         f"(--max-positions, --analysis-batch-size); give the same")
    similarity = {(row["name"], int(seed)): entry for row in summary["similarity"]
                  for seed, entry in row["per_seed"].items()}

    def make_run(name: str, seed: int, record: dict, kept_in: Path, curve: List[str]) -> EarlierHeadsRun:
        return EarlierHeadsRun(name, seed, record, kept_in, curve, similarity.get((name, seed)))

    return earlier_results(folder, SUMMARY, summary, test_sets, make_run)
