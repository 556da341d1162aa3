"""Stage 2 of the two-stage recipe (Yun 2022, ch. 3): a context model initialised from a
sentence-level Transformer checkpoint (``--pretrained-sentence-checkpoint``), for every
context architecture (hce, hmce, ctx_concat, dat, han, dct)."""
import logging
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
from fairseq.dataclass import FairseqDataclass

from fairseq_ctx.context.sentence_init_rows import check_overlap, checkpoint_dictionaries, embedding_side, shared_rows
from fairseq_ctx.core.checkpoint_loading import CheckpointError, check_task, read_checkpoint

logger = logging.getLogger(__name__)
SENTENCE_TASKS = ("translation", "context_translation")


@dataclass
class SentenceInitConfig(FairseqDataclass):
    """The option every context model takes for the two-stage recipe (Yun 2022, ch. 3)."""

    pretrained_sentence_checkpoint: Optional[str] = field(
        default=None,
        metadata={"help": "initialise from a sentence-level fairseq transformer checkpoint (two-stage "
                  "recipe); embedding rows are copied by symbol through the checkpoint's dictionaries (found "
                  "next to it or in its data directory; refused when they share fewer than half of this model's "
                  "symbols); context parameters stay freshly initialised; what was loaded is logged"},
    )


def load_sentence_checkpoint(model: torch.nn.Module, path: str, languages: Tuple[str, str]) -> Dict:
    """Copy every tensor of a sentence-level checkpoint whose name exists in ``model``.

    Embedding and output-projection rows are copied by symbol through the checkpoint's own
    dictionaries (:mod:`fairseq_ctx.context.sentence_init_rows`): rows of symbols both
    dictionaries have are copied, the rest (``<boc>``, words the checkpoint never saw) and all
    context parameters keep their fresh initialisation; a dictionary sharing fewer than half of
    this model's symbols is refused. What was (partially) loaded and what stayed new is logged
    and returned, with the row counts. A file that cannot be read, or a checkpoint whose shared
    tensors have other shapes (another model size or family), is a :class:`CheckpointError`
    naming the file and the fix. ``languages``: the model's (source, target) pair, the
    checkpoint's when it recorded none.
    """
    purpose = "--pretrained-sentence-checkpoint"
    checkpoint = read_checkpoint(path, purpose)
    check_task(checkpoint, path, SENTENCE_TASKS, purpose)
    state = checkpoint["model"]
    own = model.state_dict()
    old_dicts, old_files = checkpoint_dictionaries(checkpoint, path, purpose, languages)
    new_dicts = {"source": model.encoder.dictionary, "target": model.decoder.dictionary}
    embeddings = {name: side for name in state if name in own and (side := embedding_side(name))}
    for name, side in embeddings.items():
        check_overlap(side, new_dicts[side], old_dicts[side], state[name].size(0), old_files[side], path, purpose)
    loaded, partial, mismatched, rows = [], [], [], {}
    with torch.no_grad():
        for name, value in state.items():
            if name not in own:
                continue
            target = own[name]
            if name in embeddings and target.shape[1:] == value.shape[1:]:
                side = embeddings[name]
                new_index, old_index = shared_rows(new_dicts[side], old_dicts[side], value.size(0))
                target.index_copy_(0, new_index, value.index_select(0, old_index).to(target.dtype))
                rows[name] = (len(new_index), target.size(0), value.size(0))
                (loaded if len(new_index) == target.size(0) == value.size(0) else partial).append(name)
            elif target.shape == value.shape:
                target.copy_(value)
                loaded.append(name)
            else:
                mismatched.append(name)
    if mismatched or not loaded:
        raise CheckpointError(sentence_checkpoint_mismatch(path, purpose, state, own, mismatched))
    fresh = sorted(set(own) - set(loaded) - set(partial))
    logger.info(
        "loaded %d tensors from sentence-level checkpoint %s; embedding rows copied by symbol (copied of "
        "model rows, checkpoint rows): %s; %d tensors newly initialised: %s",
        len(loaded) + len(partial), path, ", ".join(f"{n} {c} of {m} ({o})" for n, (c, m, o) in rows.items()),
        len(fresh), fresh,
    )
    return {"loaded": loaded, "partial": partial, "fresh": fresh, "rows": rows}


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
