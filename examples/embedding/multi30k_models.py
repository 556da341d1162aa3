"""Training of the Multi30k embedding recipe: the models and their sizes, the fairseq-train
arguments of each, and the training of one model of one seed, either to a fixed budget or in
chunks until its validation xsim error plateaus (:data:`PLATEAU`, fixed before any run), with the
checkpoint of the lowest validation error kept for testing. Every step is resumable: a chunk
already trained is not trained again, and fairseq reseeds every update from the seed and the
update number, so a resumed training is the one an uninterrupted run would have done."""
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

from devtools.plateau_rule import PlateauRule, checkpoint_updates, train_until_plateau
from devtools.recipe_runs import device_args, precision_args
from devtools.recipe_tools import Step, captured_log, read_json, run, write_json
from devtools.train_log import training_machines
from examples.embedding.multi30k_embedding_data import TRAIN_PAIRS, RecipeError

# Model name -> (label, arch, criterion). Same updates, batches and optimiser for all.
MODELS = {
    "tmde": ("T-MDE", "tmde", "label_smoothed_cross_entropy"),
    "ct_mde": ("cT-MDE (T-MDE + distance_constraint)", "tmde", "distance_constraint"),
    "tmde_f": ("T-MDE_F (no bottleneck)", "tmde_f", "label_smoothed_cross_entropy"),
    "tmde_p": ("T-MDE_P (pyramid queries)", "tmde_p", "label_smoothed_cross_entropy"),
    "laser": ("LASER BiLSTM", "laser_bilstm", "label_smoothed_cross_entropy"),
}

def transformer_size(dim: int, ffn: int, encoder_layers: int, heads: int, dropout: float) -> List[str]:
    """fairseq-train options of a T-MDE Transformer (one decoder layer, as in the thesis)."""
    return ["--encoder-embed-dim", str(dim), "--decoder-embed-dim", str(dim), "--encoder-ffn-embed-dim", str(ffn),
            "--decoder-ffn-embed-dim", str(ffn), "--encoder-layers", str(encoder_layers), "--decoder-layers", "1",
            "--encoder-attention-heads", str(heads), "--decoder-attention-heads", str(heads), "--dropout", str(dropout)]


def laser_size(embed: int, hidden: int, layers: int, decoder_hidden: int, lang_embed: int) -> List[str]:
    """fairseq-train options of the LASER BiLSTM (dropout 0.1)."""
    return ["--encoder-embed-dim", str(embed), "--encoder-hidden-size", str(hidden), "--encoder-layers", str(layers),
            "--decoder-embed-dim", str(embed), "--decoder-hidden-size", str(decoder_hidden),
            "--decoder-lang-embed-dim", str(lang_embed), "--dropout", "0.1"]


# Model sizes. "small" trains in about half an hour per model on 2 CPU cores; "thesis" is Table 4.1
# (ct_mde: 1024 dims, 16 heads, FFN 4096, 6 encoder / 1 decoder layers, pre-norm, dropout 0.3;
# LASER with a 5-layer BiLSTM of 2x512), for GPUs; "tiny" is for tests.
SIZES = {
    "tiny": {"transformer": transformer_size(32, 64, 3, 4, 0.1), "pyramid": ["--pyramid-queries", "8,4,2"],
             "laser": laser_size(32, 16, 1, 64, 8),
             "train": ["--lr", "2e-3", "--warmup-updates", "10", "--max-tokens", "1000"]},
    "small": {"transformer": transformer_size(128, 512, 3, 4, 0.1), "pyramid": ["--pyramid-queries", "32,16,8"],
              "laser": laser_size(128, 64, 1, 256, 32),
              "train": ["--lr", "1e-3", "--warmup-updates", "400", "--max-tokens", "2000"]},
    "thesis": {"transformer": [*transformer_size(1024, 4096, 6, 16, 0.3), "--encoder-normalize-before",
                               "--decoder-normalize-before", "--weight-decay", "1e-4"],
               "pyramid": ["--pyramid-queries", "32,16,8"], "laser": laser_size(320, 512, 5, 2048, 32),
               "train": ["--lr", "5e-4", "--warmup-updates", "4000", "--max-tokens", "4000"]},
}

PLATEAU = PlateauRule("validation xsim error % (mean of val's 12 directions, ratio margin)", min_gain=0.5,
                      higher_is_better=False)
"""Fixed before the runs. 0.5 points of the mean error is 5 of val's 1,014 sentences per direction;
between 2400 and 4800 updates the error of both models fell by 13 points."""
LAST, BEST = "checkpoint_last.pt", "checkpoint_best_xsim.pt"


@dataclass(frozen=True)
class Budget:
    """``updates``: the budget; ``every``: validation interval of the plateau rule (0: train
    exactly ``updates``, no validation)."""

    updates: int
    every: int


def train_args(name: str, data_bin: str, save_dir: str, size: str, updates: int, seed: int,
               precision: str, device: str) -> List[str]:
    """The fairseq-train arguments of one model."""
    import fairseq_ctx

    _, arch, criterion = MODELS[name]
    sizes = SIZES[size]
    model = sizes["laser"] if arch == "laser_bilstm" else sizes["transformer"]
    if arch == "tmde_p":
        model = model + sizes["pyramid"]
    return [data_bin, "--user-dir", os.path.dirname(os.path.abspath(fairseq_ctx.__file__)),
            "--task", "multilingual_embedding", "--lang-pairs", ",".join(TRAIN_PAIRS),
            "--arch", arch, *model, "--criterion", criterion, "--label-smoothing", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr-scheduler", "inverse_sqrt", *sizes["train"],
            "--max-update", str(updates), "--seed", str(seed), *device_args(device), "--num-workers", "0",
            "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "50",
            *precision_args(precision)]


def run_settings(args: Sequence[str]) -> List[str]:
    """What must be the same for a run to continue or count as finished: the fairseq-train
    arguments without ``--max-update N`` (the budget, which grows chunk by chunk) and without
    ``--user-dir DIR`` (where the package's code is, e.g. another checkout of it, not how the model
    is trained)."""
    kept, skip = [], 0
    for arg in args:
        if skip:
            skip -= 1
        elif arg in ("--max-update", "--user-dir"):
            skip = 1
        else:
            kept.append(arg)
    return kept


def train(args: List[str], log_path: str) -> Tuple[float, float]:
    """fairseq-train in this process, its log appended to ``log_path``; wall and CPU seconds (CPU
    time is what the run takes on otherwise idle cores, wall time what it took here)."""
    start, cpu_start = time.time(), time.process_time()
    with captured_log(Path(log_path)):
        run(Step("fairseq-train", args))
    return time.time() - start, time.process_time() - cpu_start


class ModelRun:
    """One model of one seed: ``WORK[/seed<N>]/checkpoints/NAME`` (checkpoints, ``progress.json``
    with the validation curve and the time spent, ``run.json`` once training has stopped) and the
    fairseq log ``train.NAME.log``."""

    def __init__(self, name: str, seed: int, work: str) -> None:
        self.name, self.seed, self.work = name, seed, work
        self.save_dir = os.path.join(work, "checkpoints", name)
        self.run_path = os.path.join(self.save_dir, "run.json")
        self.progress_path = os.path.join(self.save_dir, "progress.json")
        self.log_path = os.path.join(work, f"train.{name}.log")

    def trained_on(self) -> List[str]:
        """The machines its training log records (none before it has one)."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as log:
            return training_machines(log.read())

    def args(self, data_bin: str, size: str, updates: int, precision: str, device: str) -> List[str]:
        return train_args(self.name, data_bin, self.save_dir, size, updates, self.seed, precision, device)

    def finished(self, args: List[str], budget: Budget) -> bool:
        """Whether training has stopped under these settings (a run stopped at a smaller budget
        before its plateau is not); a run trained with other settings is refused."""
        done = read_json(self.run_path)
        if done is None:
            return False
        every = done.get("validate_every", 0)
        if (run_settings(done["args"]) != run_settings(args) or every != budget.every
                or (every == 0 and done["updates"] != budget.updates)):
            raise RecipeError(f"{self.name} in {self.save_dir} was trained with other settings ({done['command']}, "
                              f"validation every {every} updates); use another --work or delete {self.save_dir}")
        return done.get("stopped") != "budget" or done["updates"] >= budget.updates

    def updates_done(self) -> int:
        return checkpoint_updates(Path(self.save_dir) / LAST)

    def train(self, data_bin: str, size: str, budget: Budget, precision: str, device: str,
              validation_error: Callable[[str], float]) -> dict:
        """Train to the budget or the plateau; ``validation_error(checkpoint)`` is the validation
        xsim error % of a checkpoint. Writes and returns run.json."""
        os.makedirs(self.save_dir, exist_ok=True)
        progress = read_json(self.progress_path) or {"curve": [], "wall_time_s": 0.0, "cpu_time_s": 0.0}
        last = os.path.join(self.save_dir, LAST)

        def train_to(updates: int) -> None:
            if self.updates_done() >= updates:
                return
            print(f"== train {self.name}, seed {self.seed}, to update {updates} (log {self.log_path})", flush=True)
            wall, cpu = train(self.args(data_bin, size, updates, precision, device), self.log_path)
            progress["wall_time_s"] += wall
            progress["cpu_time_s"] += cpu
            write_json(self.progress_path, progress)

        def validate(updates: int) -> float:
            error = validation_error(last)
            if all(error < value for _, value in progress["curve"]):
                shutil.copyfile(last, os.path.join(self.save_dir, BEST + ".tmp"))
                os.replace(os.path.join(self.save_dir, BEST + ".tmp"), os.path.join(self.save_dir, BEST))
            print(f"== {self.name}, seed {self.seed}, update {updates}: validation xsim error {error:.2f}%", flush=True)
            return error

        def record(curve: List[Tuple[int, float]]) -> None:
            progress["curve"] = [list(point) for point in curve]
            write_json(self.progress_path, progress)

        if budget.every:
            curve = [(int(u), float(e)) for u, e in progress["curve"]]
            stopped = train_until_plateau(PLATEAU, budget.every, budget.updates, curve, train_to, validate, record)
            convergence, checkpoint = PLATEAU.judge(curve).text, BEST
        else:
            train_to(budget.updates)
            stopped, convergence, checkpoint = "fixed", "fixed budget, not judged", LAST
        args = self.args(data_bin, size, self.updates_done(), precision, device)
        state = {"args": args, "command": Step("fairseq-train", args).shell, "updates": self.updates_done(),
                 "size": size, "precision": precision, "wall_time_s": progress["wall_time_s"],
                 "cpu_time_s": progress["cpu_time_s"], "trained_on": self.trained_on(),
                 "validate_every": budget.every, "stopped": stopped, "convergence": convergence,
                 "curve": progress["curve"], "checkpoint": checkpoint}
        write_json(self.run_path, state)
        return state
