"""The model runs of the Multi30k recipes in their work directory: one seed's models in ``--work``
(``spm/``, ``data-bin/``, ``checkpoints/<name>/``, ``eval/<name>/``, ``results/<name>.json``) or,
with ``--seeds``, seed N's in ``<work>/seed<N>/``, laid out the same way. A run's results file is
written once it is trained and lists the test sets it has been decoded on; what a run still
lacks, the settings it was trained with, and the command that resumes it are read from there."""
import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from devtools.plateau_rule import checkpoint_updates
from devtools.recipe_report import unfinished_run
from devtools.recipe_tools import read_json
from examples.multimodal_mt.multi30k_data import DEFAULT_TEST, SOURCE, SPM_LANGS, TARGET

LABEL_SMOOTHED = ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
# what a results file written before these settings existed was run with
EARLIER_DEFAULTS = {"precision": "fp32", "spm_langs": SPM_LANGS, "clip_norm": 1.0, "average_last": 0, "curve_every": 5}
NOT_SETTINGS = {"workers"}  # recorded by earlier versions; does not change a result


@dataclass
class Model:
    """One model of the recipe: a strategy, and the second source language (None: text-only)."""

    strategy: str
    extra: Optional[str]

    @property
    def name(self) -> str:
        return self.strategy if self.extra is None else f"{self.strategy}-{self.extra}"

    @property
    def pair(self) -> str:
        return f"{SOURCE}→{TARGET}" if self.extra is None else f"{SOURCE}+{self.extra}→{TARGET}"


@dataclass
class ModelRun:
    """One model trained with one seed in ``seed_dir``, decoded on ``test_sets``; ``name`` names
    its checkpoint, eval and results entries, ``criterion`` its fairseq criterion options."""

    name: str
    model: Model
    seed: int
    seed_dir: Path
    args: argparse.Namespace
    settings: Dict[str, object]
    test_sets: List[str]
    user_dir: str
    criterion: List[str] = field(default_factory=lambda: list(LABEL_SMOOTHED))

    @property
    def record_path(self) -> Path:
        return self.seed_dir / "results" / f"{self.name}.json"

    @property
    def eval_dir(self) -> Path:
        return self.seed_dir / "eval" / self.name

    @property
    def checkpoint_dir(self) -> Path:
        return self.seed_dir / "checkpoints" / self.name

    def record(self) -> Optional[dict]:
        return read_json(self.record_path)


def seed_dir_in(work: Path, seed: int, name: str) -> Path:
    """Seed ``seed``'s directory in another recipe run's ``work``: ``work/seed<N>``, or ``work``
    itself (a run without ``--seeds``) when its run ``name`` has that seed."""
    seeded = work / f"seed{seed}"
    if seeded.is_dir():
        return seeded
    record = read_json(work / "results" / f"{name}.json")
    return work if record is not None and record["settings"]["seed"] == seed else seeded


def record_in(work: Path, seed: int, name: str) -> Path:
    """The results file of run ``name`` with seed ``seed`` in another recipe run's ``work`` (which may lack it)."""
    return seed_dir_in(work, seed, name) / "results" / f"{name}.json"


def data_difference(seed_dir: Path, other: Path) -> Optional[str]:
    """Why the seed directories ``seed_dir`` and ``other`` (of two recipe runs) do not hold the same
    prepared data: the first of their subword vocabulary, the one dictionary every language is
    binarized with (``dict/dict.all.txt``) and its en and de copies in ``data-bin`` that differs
    (None: none; spm.model is not compared, it also records its input paths)."""
    for name in ("spm/spm.vocab", "dict/dict.all.txt", "data-bin/dict.en.txt", "data-bin/dict.de.txt"):
        if (seed_dir / name).read_bytes() != (other / name).read_bytes():
            return f"{other / name} differs from {seed_dir / name}: the two runs prepared different data"
    return None


def decoded_test_sets(record: dict) -> Dict[str, dict]:
    """The test sets a trained model has been decoded on, ``{stem: {"split", "eval_wall_s",
    "commands"}}`` (a results file written before test sets were recorded holds test_2016_flickr)."""
    if "test_sets" in record:
        return record["test_sets"]
    return {DEFAULT_TEST: {"split": "test", "eval_wall_s": record.get("eval_wall_s", 0.0),
                           "commands": record.get("commands", [])[1:]}}


def missing_work(model_run: ModelRun) -> List[str]:
    """What a run still lacks: its training (with the update its last checkpoint reached, if it has
    one), or the test sets it has not been decoded on."""
    record = model_run.record()
    if record is None:
        done = checkpoint_updates(model_run.checkpoint_dir / "checkpoint_last.pt")
        return [f"training (interrupted at update {done} of {model_run.args.max_update}; resumes from "
                f"checkpoint_last.pt)" if done else "training"]
    lacking = [stem for stem in model_run.test_sets if stem not in decoded_test_sets(record)]
    wants_curve = getattr(model_run.args, "test_curve", False) and model_run.args.average_last
    return lacking + (["the test curve (--test-curve)"] if wants_curve and "test_curve" not in record else [])


def training_settings(args: argparse.Namespace, seed: int, names: Sequence[str]) -> Dict[str, object]:
    """The settings a result depends on (recorded with it; a resumed run must have the same)."""
    return {**{name: getattr(args, name) for name in names}, "seed": seed}


def different_settings(recorded: Dict[str, object], current: Dict[str, object]) -> List[str]:
    """``key: value there, value now`` for every setting that differs (a setting a results file
    does not have counts with the value every run had before it existed)."""
    keys = [key for key in dict.fromkeys([*current, *recorded]) if key not in NOT_SETTINGS]
    before = {key: recorded.get(key, EARLIER_DEFAULTS.get(key)) for key in keys}
    now = {key: current.get(key, EARLIER_DEFAULTS.get(key)) for key in keys}
    return [f"{key}: {before[key]!r} there, {now[key]!r} now" for key in keys if before[key] != now[key]]


def refuse_other_settings(runs: Sequence[ModelRun], program: str) -> None:
    """Exit naming the first requested run whose results file has other settings, before any work."""
    for model_run in runs:
        record = model_run.record()
        changed = [] if record is None else different_settings(record["settings"], model_run.settings)
        if changed:
            sys.exit(f"{program}: error: {model_run.record_path} was trained with other settings "
                     f"({'; '.join(changed)}); delete it to retrain {model_run.name}, or use another --work")


@dataclass
class RunTable:
    """What the tables report: the trained runs (each reported for what it has: the test sets it
    was decoded on), the runs that lack something with the command that resumes each, and results
    files left out for their settings."""

    trained: List[ModelRun]
    unfinished: List[dict]
    left_out: List[str]


def survey(runs: Sequence[ModelRun], seeds: Sequence[Tuple[int, Path]], resume: Callable[[ModelRun], str],
           found: Callable[[dict, int, Path], ModelRun],
           missing: Callable[[ModelRun], List[str]] = missing_work) -> RunTable:
    """Sort the requested ``runs``: trained ones (with a results file) are reported, and every one
    that lacks something (``missing``) is listed with the command ``resume`` gives; other results
    files in the seed directories (``found`` makes their runs) are reported when their settings
    are this run's, else left out."""
    table = RunTable([], [], [])
    requested = {(r.name, r.seed) for r in runs}
    for model_run in runs:
        lacks = missing(model_run)
        if lacks:
            table.unfinished.append(unfinished_run(model_run.name, model_run.seed, "missing: " + ", ".join(lacks),
                                                   resume(model_run)))
        if model_run.record() is not None:
            table.trained.append(model_run)
    for seed, directory in seeds:
        for path in sorted((directory / "results").glob("*.json")):
            if (path.stem, seed) in requested:
                continue
            other = found(read_json(path), seed, directory)
            if different_settings(other.record()["settings"], other.settings):
                table.left_out.append(f"{path} (trained with other settings)")
            else:
                table.trained.append(other)
    return table
