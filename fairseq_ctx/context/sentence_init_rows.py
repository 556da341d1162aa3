"""Embedding rows of a sentence-level checkpoint copied into a context model by symbol, not by
index (the two-stage recipe of Yun (2022): the context model starts from the sentence-level
one). The checkpoint's dictionaries are read from its directory or its data directory (the
absolute one our tasks record; fairseq's stored ``--data`` only when it is absolute, since a
relative one names a directory that depends on where the command runs) and, when the checkpoint
records their fingerprints, checked to be the ones it was trained with; a dictionary that shares
fewer than :data:`MIN_OVERLAP` of the model's symbols is refused."""
import os
from typing import Dict, Optional, Tuple

import torch
from fairseq import utils
from fairseq.data import Dictionary, data_utils

from fairseq_ctx.core.checkpoint_loading import (CheckpointError, check_dictionaries, recorded_data_directory,
                                                 task_and_arch)

MIN_OVERLAP = 0.5
SIDES = {"encoder.": "source", "decoder.": "target"}
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "output_projection.weight")


def embedding_side(name: str) -> Optional[str]:
    """``source``/``target`` for a tensor whose rows are dictionary entries, else None."""
    if not name.endswith(EMBEDDING_SUFFIXES):
        return None
    return next((side for prefix, side in SIDES.items() if name.startswith(prefix)), None)


def _task_setting(state: Dict, key: str, default=None):
    if state.get("cfg") is not None:
        return state["cfg"].task.get(key, default)
    return getattr(state["args"], key, default)


def checkpoint_dictionaries(state: Dict, path: str, purpose: str,
                            languages: Tuple[str, str]) -> Tuple[Dict[str, Dictionary], Dict[str, str]]:
    """The source and target dictionaries the checkpoint's model was built with (the task's
    context-begin symbol added for a context_translation checkpoint), and the files they came from.
    Looked up next to the checkpoint first, then in its data directory: the absolute one recorded
    in it, else fairseq's stored ``--data`` when that is absolute. The language pair is the
    checkpoint's, inferred from its data directory when not recorded, else ``languages``."""
    src, tgt = _task_setting(state, "source_lang"), _task_setting(state, "target_lang")
    stored = [d for d in utils.split_paths(_task_setting(state, "data") or "") if d][:1]
    recorded = [d for d in utils.split_paths(recorded_data_directory(state) or "") if d][:1]
    data = recorded or [d for d in stored if os.path.isabs(d)]
    if (src is None or tgt is None) and data and os.path.isdir(data[0]):
        src, tgt = data_utils.infer_language_pair(data[0])
    if src is None or tgt is None:
        src, tgt = languages
    candidates = [os.path.dirname(os.path.abspath(path))] + data
    for directory in candidates:
        files = {"source": os.path.join(directory, f"dict.{src}.txt"), "target": os.path.join(directory, f"dict.{tgt}.txt")}
        if all(os.path.isfile(f) for f in files.values()):
            break
    else:
        unused = [d for d in stored if not os.path.isabs(d) and not recorded]
        raise CheckpointError(
            f"{purpose}: cannot find the dictionaries of {path} (dict.{src}.txt and dict.{tgt}.txt, looked in "
            f"{' and '.join(candidates)}"
            + (f"; its data directory '{unused[0]}' is relative (fairseq stores --data as given) and the checkpoint "
               f"does not record where it was trained, so it could name another directory from here" if unused else "")
            + "); its embedding rows are copied by symbol, so copy the dict.*.txt files of the data it was trained on "
              "next to the checkpoint"
        )
    dictionaries = {side: Dictionary.load(f) for side, f in files.items()}
    if task_and_arch(state)[0] == "context_translation":  # as the task's __init__ extends them
        joined = dictionaries["source"] == dictionaries["target"]
        symbol = _task_setting(state, "context_begin_symbol", "<boc>")
        dictionaries["source"].add_symbol(symbol)
        if joined or _task_setting(state, "target_context_size", 0) > 0:
            dictionaries["target"].add_symbol(symbol)
    check_dictionaries(state, path, purpose, dictionaries, os.path.dirname(files["source"]))
    return dictionaries, files


def shared_rows(new: Dictionary, old: Dictionary, old_rows: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(rows of ``new``, matching rows of ``old``) for the symbols both have; only the first
    ``old_rows`` symbols of ``old`` have a row in the checkpoint."""
    pairs = [(i, old.indices[s]) for i, s in enumerate(new.symbols) if old.indices.get(s, old_rows) < old_rows]
    new_index, old_index = zip(*pairs) if pairs else ((), ())
    return torch.tensor(new_index, dtype=torch.long), torch.tensor(old_index, dtype=torch.long)


def check_overlap(side: str, new: Dictionary, old: Dictionary, old_rows: int, old_file: str, path: str,
                  purpose: str) -> int:
    """Number of the model's symbols the checkpoint has a row for; a :class:`CheckpointError` when it
    is below :data:`MIN_OVERLAP` of the model's dictionary."""
    if old_rows > len(old):
        raise CheckpointError(
            f"{purpose}: {path} has {old_rows} {side} embedding rows but its dictionary {old_file} gives only "
            f"{len(old)} symbols; put the dict.*.txt the checkpoint was trained with next to it"
        )
    overlap = len(shared_rows(new, old, old_rows)[0])
    if overlap < MIN_OVERLAP * len(new):
        raise CheckpointError(
            f"{purpose}: {path} was trained with another {side} dictionary: {old_file} has {min(old_rows, len(old))} "
            f"symbols, this model's has {len(new)}, and only {overlap} ({100 * overlap / len(new):.1f}%) of this "
            f"model's symbols are in both (at least {100 * MIN_OVERLAP:.0f}% needed). Train the sentence-level model "
            f"on the same binarized data, or binarize this data with its dictionaries (fairseq-preprocess --srcdict "
            f"--tgtdict)"
        )
    return overlap
