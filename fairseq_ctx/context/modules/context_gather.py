"""Turn the shared batch format (``context_tokens`` (U, Lc) + ``context_index`` (B, N)) into
per-example context inputs; used by every context baseline so that batching stays in one place."""
from typing import Tuple

import torch
from torch import Tensor


def gather_slots(per_sentence: Tensor, padding: Tensor, context_index: Tensor) -> Tuple[Tensor, Tensor]:
    """Per-slot copies of the unique context sentences.

    per_sentence: (U, Lc, ...) values of each unique sentence (tokens or states);
    padding: (U, Lc), True at padding; context_index: (B, N), -1 = empty slot.
    Returns values (B, N, Lc, ...) and padding (B, N, Lc); empty slots are all padding.
    """
    empty = context_index.lt(0)
    rows = context_index.clamp(min=0)
    values = per_sentence[rows]
    slot_padding = padding[rows] | empty.unsqueeze(-1)
    return values, slot_padding


def compact(values: Tensor, padding: Tensor) -> Tuple[Tensor, Tensor]:
    """Move the non-pad positions of each row to the front (keeping their order) and drop
    the columns that are padding in every row. values: (B, T, ...); padding: (B, T)."""
    order = torch.sort(padding.to(torch.uint8), dim=1, stable=True).indices
    length = max(int((~padding).sum(dim=1).max()), 1)
    order = order[:, :length]
    index = order.view(*order.shape, *([1] * (values.dim() - 2))).expand(*order.shape, *values.shape[2:])
    return values.gather(1, index), padding.gather(1, order)


def concatenated_context(per_sentence: Tensor, padding: Tensor, context_index: Tensor) -> Tuple[Tensor, Tensor]:
    """The context sentences of each example concatenated (c_0 first) into one right-padded
    sequence: values (B, T, ...), padding (B, T) with T = the longest concatenation."""
    values, slot_padding = gather_slots(per_sentence, padding, context_index)
    batch, slots, length = slot_padding.shape
    return compact(values.reshape(batch, slots * length, *values.shape[3:]), slot_padding.reshape(batch, -1))
