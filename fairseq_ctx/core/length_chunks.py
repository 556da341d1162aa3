"""Length chunks: run a batch of mixed-length sentences as a few less padded sub-batches.

Chunks pay off only when each is big enough to keep the matrix products efficient: measured
with benchmarks/context_speed.py-style runs (hmce, CPU), 3 chunks of ~43 sentences raised
training words/s by 11%, while chunks of ~10 sentences lowered it by 8%.
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

MIN_ROWS_PER_CHUNK = 32
MIN_PADDING_SAVED = 0.1


class SinglePass:
    """Declared by a model or module whose fast path calls its attention modules other than
    once per batch over every position (length chunks; a last layer computed at position 0
    only). Forward hooks that expect one full call per module and batch (head taps, drophead,
    representation capture) switch such paths off with :func:`use_single_pass`."""

    def use_single_pass(self) -> None:
        raise NotImplementedError


def use_single_pass(model: nn.Module) -> None:
    """Switch off the fast path of every :class:`SinglePass` module of ``model`` (itself included)."""
    for module in model.modules():
        if isinstance(module, SinglePass):
            module.use_single_pass()


def trim_padding(tokens: Tensor, padding_idx: int) -> Tuple[Tensor, Tensor]:
    """``tokens`` without the columns that are padding in every row (left or right padded),
    and the indices of the columns kept."""
    columns = tokens.ne(padding_idx).any(dim=0).nonzero().squeeze(1)
    return tokens.index_select(1, columns), columns


def widen(x: Tensor, columns: Tensor, length: int, dim: int) -> Tensor:
    """Undo :func:`trim_padding` on ``x`` along ``dim``: a tensor of ``length`` there with
    ``x`` at ``columns`` and zeros elsewhere."""
    shape = list(x.shape)
    shape[dim] = length
    return x.new_zeros(shape).index_copy(dim, columns, x)


def in_batch_order(pieces: List[Tensor], chunks: List[Tensor], dim: int = 0) -> Tensor:
    """Per-chunk results (chunk ``i`` holding batch rows ``chunks[i]`` along ``dim``) as one
    tensor whose rows along ``dim`` are in batch order."""
    return torch.cat(pieces, dim).index_select(dim, torch.argsort(torch.cat(chunks)))


def length_chunks(lengths: Tensor, max_chunks: int) -> Optional[List[Tensor]]:
    """Batch rows sorted by ``lengths`` and cut into up to ``max_chunks`` chunks of at least
    ``MIN_ROWS_PER_CHUNK`` rows, or None when that would not cut at least
    ``MIN_PADDING_SAVED`` of the padded positions (a batch of similar lengths)."""
    count = min(max_chunks, lengths.numel() // MIN_ROWS_PER_CHUNK)
    if count <= 1:
        return None
    order = torch.argsort(lengths, stable=True)
    chunks = list(torch.tensor_split(order, count))
    padded = lengths.numel() * int(lengths.max())
    chunked = sum(rows.numel() * int(lengths[rows].max()) for rows in chunks)
    if padded - chunked < MIN_PADDING_SAVED * padded:
        return None
    return chunks
