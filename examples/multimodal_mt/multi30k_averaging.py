"""The tested model of the Multi30k recipes with ``--average-last N``: the parameter average of the
last N epoch checkpoints (Wu et al., 2021, the last 10), and the validation curve of such averages,
which the plateau rule judges: the average of the N checkpoints ending at epoch N, N + k, …, and
the last epoch (k = ``--curve-every``), each decoded on the validation split with the test's beam
search and scored as the test sets are. Each point's output is kept in ``eval/<name>/curve/epoch<E>/``
(written anew after each training); the last point's average is the tested model,
``checkpoints/<name>/checkpoint_averaged.pt``. With ``--test-curve`` the same averages are also
decoded on the first test set: the test score of every budget up to the run's (a shorter run of
the same schedule is this run's beginning).
"""
import shutil
from pathlib import Path
from typing import Callable, Dict, List

from devtools.plateau_rule import checkpoint_updates
from devtools.recipe_tools import write_whole
from devtools.checkpoint_averaging import average_checkpoints, epoch_checkpoints, window_checkpoints
from examples.multimodal_mt.multi30k_data import TARGET
from examples.multimodal_mt.multi30k_evaluation import export_hypotheses, read_lines, test_scores
from examples.multimodal_mt.multi30k_runs import ModelRun

AVERAGED = "checkpoint_averaged.pt"
BEST = "checkpoint_best.pt"


def tested_checkpoint(model_run: ModelRun) -> Path:
    """The checkpoint the test sets are decoded with: the average, or (``--average-last 0``) the best."""
    return model_run.checkpoint_dir / (AVERAGED if model_run.args.average_last else BEST)


def curve_epochs(last_epoch: int, window: int, every: int) -> List[int]:
    """The epochs whose ``window``-checkpoint average the curve validates: ``window``, ``window + every``, …, and the last."""
    epochs = list(range(window, last_epoch + 1, every))
    return epochs if epochs and epochs[-1] == last_epoch else [*epochs, last_epoch]


def decode_curve(model_run: ModelRun, decode: Callable[[Path, Path], None], split: str, reference: str,
                 folder: str) -> List[Dict[str, object]]:
    """Each curve point's average (the N epoch checkpoints ending at it) decoded on ``split``
    (``decode(checkpoint, out)`` writes ``out/generate-<split>.txt``; ``reference``: its reference
    file) into ``eval/<name>/<folder>/epoch<E>/``: ``[{"epoch", "updates", scores…}, …]``. The
    last point's average is the tested checkpoint."""
    window, every = model_run.args.average_last, model_run.args.curve_every
    checkpoints = epoch_checkpoints(model_run.checkpoint_dir)
    if not checkpoints or max(checkpoints) < window:
        raise SystemExit(f"{model_run.name}: training ended after {max(checkpoints, default=0)} epoch(s), fewer than "
                         f"--average-last {window}; give more --max-update or a smaller --average-last")
    last = max(checkpoints)
    references = read_lines(Path(reference))
    shutil.rmtree(model_run.eval_dir / folder, ignore_errors=True)
    (model_run.eval_dir / folder).mkdir(parents=True)
    points = []
    for epoch in curve_epochs(last, window, every):
        out = model_run.eval_dir / folder / f"epoch{epoch}"
        averaged = tested_checkpoint(model_run) if epoch == last else out.with_name(f"epoch{epoch}.averaged.pt")
        average_checkpoints(window_checkpoints(checkpoints, epoch, window, model_run.name), str(averaged))
        decode(averaged, out)
        if epoch != last:
            averaged.unlink()
        hypotheses = export_hypotheses(out / f"generate-{split}.txt", reference, out / "hypotheses.txt")
        points.append({"epoch": epoch, "updates": checkpoint_updates(checkpoints[epoch]),
                       **test_scores(hypotheses, references)})
    return points


def averaged_curve(model_run: ModelRun, decode_valid: Callable[[Path, Path], None], reference: str) -> List[List[float]]:
    """The curve ``[[updates, BLEU], …]`` of the run's averaged checkpoints on the validation split
    (:func:`decode_curve`), which the plateau rule judges."""
    return [[point["updates"], point["bleu"]] for point in decode_curve(model_run, decode_valid, "valid", reference,
                                                                        "curve")]


def budget_curve(model_run: ModelRun, decode_test: Callable[[Path, Path], None], split: str,
                 reference: str) -> List[Dict[str, object]]:
    """A test split decoded with each curve point's average (``--test-curve``): the model a run
    of that many updates tests, as the schedule does not depend on --max-update (inverse_sqrt, the
    same epochs): a shorter run is this run's beginning. Kept in ``eval/<name>/test_curve/``."""
    points = decode_curve(model_run, decode_test, split, reference, "test_curve")
    return [{key: point[key] for key in ("epoch", "updates", "bleu", "chrf", "bp", "ratio", "bleu_no_bp", "sys_len",
                                         "ref_len")} for point in points]


def export_curve_hypotheses(model_run: ModelRun, out_dir: Path) -> List[str]:
    """Copy each curve point's validation hypotheses next to the tables, as
    ``hypotheses/<name>.seed<N>.val.average_to_epoch<E>.de``, and those of the test curve
    (``--test-curve``) as ``hypotheses/<name>.seed<N>.<test set>.average_to_epoch<E>.de``; returns those names."""
    names = []
    record = model_run.record() or {}
    folders = [("curve", "val"), *(("test_curve", stem) for stem in record.get("test_curve", {}))]
    for folder, split in folders:
        points = [d for d in (model_run.eval_dir / folder).glob("epoch*") if d.is_dir() and d.name[5:].isdigit()]
        for directory in sorted(points, key=lambda d: int(d.name[5:])):
            name = f"hypotheses/{model_run.name}.seed{model_run.seed}.{split}.average_to_epoch{directory.name[5:]}.{TARGET}"
            write_whole(out_dir / name, (directory / "hypotheses.txt").read_text(encoding="utf-8"))
            names.append(name)
    return names
