"""Stage 2 of the two-stage recipe (Yun 2022, ch. 3): a context model initialised from a
sentence-level Transformer checkpoint (``--pretrained-sentence-checkpoint``), for every
context architecture (hce, hmce, ctx_concat, dat, han, dct)."""
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.dataclass import FairseqDataclass

from fairseq_ctx.core.checkpoint_loading import CheckpointError, check_task, read_checkpoint

logger = logging.getLogger(__name__)
SENTENCE_TASKS = ("translation", "context_translation")


@dataclass
class SentenceInitConfig(FairseqDataclass):
    """The option every context model takes for the two-stage recipe (Yun 2022, ch. 3)."""

    pretrained_sentence_checkpoint: Optional[str] = field(
        default=None,
        metadata={"help": "initialise from a sentence-level fairseq transformer checkpoint (two-stage "
                  "recipe); context parameters stay freshly initialised; what was loaded is logged"},
    )


def load_sentence_checkpoint(model: torch.nn.Module, path: str) -> Dict[str, List[str]]:
    """Copy every tensor of a sentence-level checkpoint whose name exists in ``model``.

    Embedding matrices that are shorter only because our dictionary gained symbols
    (``<boc>``) are copied row-wise; the new rows and all context parameters keep their
    fresh initialisation. What was (partially) loaded and what stayed new is logged and
    returned. A file that cannot be read, or a checkpoint whose shared tensors have other
    shapes (another model size or family), is a :class:`CheckpointError` naming the file and
    the fix.
    """
    purpose = "--pretrained-sentence-checkpoint"
    checkpoint = read_checkpoint(path, purpose)
    check_task(checkpoint, path, SENTENCE_TASKS, purpose)
    state = checkpoint["model"]
    own = model.state_dict()
    loaded, partial, mismatched = [], [], []
    with torch.no_grad():
        for name, value in state.items():
            if name not in own:
                continue
            target = own[name]
            if target.shape == value.shape:
                target.copy_(value)
                loaded.append(name)
            elif target.dim() == value.dim() and target.shape[1:] == value.shape[1:] and value.size(0) < target.size(0):
                target[: value.size(0)].copy_(value)
                partial.append(name)
            else:
                mismatched.append(name)
    if mismatched or not loaded:
        raise CheckpointError(sentence_checkpoint_mismatch(path, purpose, state, own, mismatched))
    fresh = sorted(set(own) - set(loaded) - set(partial))
    logger.info(
        "loaded %d tensors from sentence-level checkpoint %s (%d row-wise for added symbols: %s); "
        "%d tensors newly initialised: %s",
        len(loaded), path, len(partial), partial, len(fresh), fresh,
    )
    return {"loaded": loaded, "partial": partial, "fresh": fresh}


def sentence_checkpoint_mismatch(path: str, purpose: str, state, own, mismatched) -> str:
    if not mismatched:
        return (f"{purpose}: {path} shares no tensor name with this model ({len(state)} tensors, e.g. "
                f"{sorted(state)[:3]}); give the checkpoint of a sentence-level transformer (fairseq-train --arch "
                f"transformer, or --task context_translation --context-size 0)")
    shown = ", ".join(f"{name} {tuple(state[name].shape)} vs {tuple(own[name].shape)}" for name in mismatched[:3])
    return (f"{purpose}: {path} does not fit this model: {len(mismatched)} tensors differ in shape "
            f"(checkpoint vs model: {shown}); train the sentence-level model with the same sizes "
            f"(--encoder-embed-dim, --encoder-ffn-embed-dim, --encoder-attention-heads, decoder likewise) or "
            f"pass those sizes here")
