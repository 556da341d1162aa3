"""The average of several checkpoints of one training run, as a checkpoint every fairseq tool loads.

Averaging the parameters of the last epoch checkpoints is the test model of the small-Transformer
Multi30k baselines (Wu et al., 2021, "Good for Misconceived Reasons", §4: the last 10 epochs),
done there by fairseq's ``scripts/average_checkpoints.py``. That script is part of fairseq's
source tree but not of its wheel (``pip install fairseq`` has no ``scripts`` package), so the
same arithmetic is here: each parameter is the mean of its values in the inputs, summed in
float64 and stored in its own dtype. The inputs are read through the package's one checkpoint
reader (CRC-checked, weights-only). Everything but the parameters (the configuration, the task
state with its dictionary fingerprints, the training progress) is the last input's; the
optimizer state is left out, so the result is a model to decode with, not to resume from.
"""
import hashlib
import os
import re
from pathlib import Path
from typing import Dict, List, Sequence

import torch
from fairseq import checkpoint_utils
from omegaconf import OmegaConf

from fairseq_ctx.core.checkpoint_loading import CheckpointError, read_checkpoint

PURPOSE = "checkpoint averaging"
EPOCH_CHECKPOINT = re.compile(r"checkpoint(\d+)\.pt")


def epoch_checkpoints(directory: Path) -> Dict[int, Path]:
    """fairseq-train's end-of-epoch checkpoints in ``directory``: ``{epoch: checkpoint<epoch>.pt}``."""
    found = {}
    for path in Path(directory).glob("checkpoint*.pt"):
        match = EPOCH_CHECKPOINT.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = path
    return found


def window_checkpoints(checkpoints: Dict[int, Path], epoch: int, window: int, run_name: str) -> List[str]:
    """The ``window`` epoch checkpoints ending at ``epoch``; exits naming the first one missing."""
    chosen = list(range(epoch - window + 1, epoch + 1))
    missing = [e for e in chosen if e not in checkpoints]
    if missing:
        raise SystemExit(f"{run_name}: checkpoint{missing[0]}.pt is missing from the run's checkpoints; the average of "
                         f"epochs {chosen[0]}–{epoch} needs every one (train the run again, or give a smaller "
                         f"--average-last)")
    return [str(checkpoints[e]) for e in chosen]


def average_last_epochs(directory: Path, window: int, output: Path, run_name: str) -> List[str]:
    """Write the average of the last ``window`` epoch checkpoints in ``directory`` to ``output``;
    returns the averaged checkpoints' names. Exits when the run has fewer epochs than ``window``."""
    checkpoints = epoch_checkpoints(directory)
    if not checkpoints or max(checkpoints) < window:
        raise SystemExit(f"{run_name}: training ended after {max(checkpoints, default=0)} epoch(s), fewer than "
                         f"--average-last {window}; give more updates or a smaller --average-last")
    chosen = window_checkpoints(checkpoints, max(checkpoints), window, run_name)
    average_checkpoints(chosen, str(output))
    return [os.path.basename(path) for path in chosen]


def averaged_parameters(states: Sequence[Dict]) -> Dict[str, torch.Tensor]:
    """The element-wise mean of the ``model`` entries of ``states``, which must name the same
    parameters with the same shapes."""
    names = list(states[0]["model"])
    total: Dict[str, torch.Tensor] = {name: torch.zeros_like(tensor, dtype=torch.float64)
                                      for name, tensor in states[0]["model"].items()}
    for state in states:
        if list(state["model"]) != names:
            raise CheckpointError(f"{PURPOSE}: the checkpoints hold different parameters; average checkpoints of "
                                  f"one training run only")
        for name, tensor in state["model"].items():
            if tensor.shape != total[name].shape:
                raise CheckpointError(f"{PURPOSE}: parameter {name} has shape {tuple(tensor.shape)} in one checkpoint "
                                      f"and {tuple(total[name].shape)} in another; average checkpoints of one run only")
            total[name] += tensor.double()
    first = states[0]["model"]
    return {name: (value / len(states)).to(first[name].dtype) for name, value in total.items()}


def average_checkpoints(paths: Sequence[str], output: str) -> None:
    """Write the average of the checkpoints ``paths`` to ``output`` (through a temporary file and a
    rename, so ``output`` never holds part of it); ``output`` may not be one of ``paths``."""
    if not paths:
        raise CheckpointError(f"{PURPOSE}: no checkpoints given")
    if any(os.path.realpath(path) == os.path.realpath(output) for path in paths):
        raise CheckpointError(f"{PURPOSE}: the output {output} is one of the inputs; write the average elsewhere")
    states: List[Dict] = [read_checkpoint(path, PURPOSE) for path in paths]
    averaged = dict(states[-1])
    averaged["model"] = averaged_parameters(states)
    averaged.pop("last_optimizer_state", None)
    if OmegaConf.is_config(averaged.get("cfg")):
        averaged["cfg"] = OmegaConf.to_container(averaged["cfg"], resolve=True, enum_to_str=True)
    averaged["averaged_checkpoints"] = [os.path.basename(path) for path in paths]
    checkpoint_utils.torch_persistent_save(averaged, output)


def weights_digest(path: Path) -> str:
    """The SHA-256 of a checkpoint's parameters (names, shapes, dtypes and float32 bytes, in name
    order): equal for two files holding the same model however else they differ (the saved
    configuration, the optimizer state), so runs made in different sessions can show that they
    start from the same model."""
    digest = hashlib.sha256()
    for name, tensor in sorted(read_checkpoint(str(path), PURPOSE)["model"].items()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()
