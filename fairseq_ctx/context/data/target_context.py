"""The batch entries of target-side context (``--target-context-size M``): the previous M target
sentences of the same document (Voita et al. (2019); Müller et al. (2018); Bawden et al. (2018)),
collated the same way by the binarized dataset (reference translations), the raw-text collater
(the hub, contrastive scoring) and decoding with the model's own previous output.

- ``net_input["target_context_tokens"]``: (V, Lt) right-padded, target dictionary: every distinct
  previous target sentence of the batch once, ``[<boc>] + tokens`` ending in ``</s>``, truncated
  to ``max_context_tokens`` (the final ``</s>`` kept); V may be 0: shape (0, 1) of pad;
- ``net_input["target_context_index"]``: (B, M) row of ``target_context_tokens`` for slot m
  (m = 0: the nearest previous sentence) of example b, or -1 for an empty slot.
"""
from typing import Callable, Dict, Hashable, List, Sequence, Tuple

import torch
from fairseq.data import data_utils


def context_sentence(tokens: torch.Tensor, boc_index: int, eos_index: int, max_tokens: int) -> torch.Tensor:
    """A context sentence of either side as the batches carry it: ``[<boc>] + tokens`` (``tokens``
    end in ``</s>``), cut to ``max_tokens`` keeping a final ``</s>``."""
    sentence = torch.cat([tokens.new_tensor([boc_index]), tokens.long()])
    if sentence.numel() > max_tokens:
        sentence = torch.cat([sentence[: max_tokens - 1], sentence.new_tensor([eos_index])])
    return sentence


def collate_target_context(rows: Sequence[Sequence[Hashable]], sentence_of: Callable[[Hashable], torch.Tensor],
                           size: int, pad_index: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(target_context_tokens, target_context_index)`` for a batch whose row b has the previous
    target sentences ``rows[b]`` (keys, nearest first; only the first ``size`` are used);
    ``sentence_of(key)`` gives the collated sentence (:func:`context_sentence`). A key
    occurring in several rows is stored once."""
    unique: Dict[Hashable, int] = {}
    index = torch.full((len(rows), size), -1, dtype=torch.long)
    for row, keys in enumerate(rows):
        for slot, key in enumerate(list(keys)[:size]):
            index[row, slot] = unique.setdefault(key, len(unique))
    sentences: List[torch.Tensor] = [sentence_of(key) for key in unique]
    if sentences:
        tokens = data_utils.collate_tokens(sentences, pad_index, left_pad=False)
    else:
        tokens = torch.full((0, 1), pad_index, dtype=torch.long)
    return tokens, index
