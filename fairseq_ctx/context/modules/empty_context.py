"""The one treatment of sentences without context (a document-initial sentence, or a
sentence-level batch), shared by every context model (Yun 2022, ch. 3: such a sentence gets
its sentence-level encoding).

- :func:`context_or_placeholder`: missing context becomes one placeholder ``[eos]`` sentence
  that no slot points to, so the context path still runs and every parameter stays in the graph;
- :func:`attendable`: a row whose context keys are all padding attends them unmasked (a softmax
  over nothing would be NaN); the returned ``has_context`` marks the rows whose result counts;
- :func:`without_context`: rows without context take the given fallback (the sentence-level
  states, or zero) instead of their context result.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor


def context_or_placeholder(
    src_tokens: Tensor, context_tokens: Optional[Tensor], context_index: Optional[Tensor], eos: int
) -> Tuple[Tensor, Tensor]:
    """``context_tokens`` (U, Lc) and ``context_index`` (B, N), -1 = empty slot, with at least one
    sentence row: none given (sentence-level batch) means every slot is empty, and no context
    sentence at all means one placeholder ``[eos]`` row."""
    if context_index is None or context_tokens is None:
        context_index = src_tokens.new_full((src_tokens.size(0), 1), -1)
        context_tokens = src_tokens.new_zeros((0, 1))
    if context_tokens.size(0) == 0:
        context_tokens = placeholder_sentence(src_tokens, eos)
    return context_tokens, context_index


def placeholder_sentence(src_tokens: Tensor, eos: int) -> Tensor:
    """The (1, 1) ``[eos]`` sentence encoded when a batch has no context sentence."""
    return src_tokens.new_full((1, 1), eos)


def attendable(key_padding_mask: Tensor) -> Tuple[Tensor, Tensor]:
    """(B, S) key padding (True = padding) → the mask to attend with, in which rows with no key
    are unmasked, and ``has_context`` (B,), False for those rows."""
    has_context = ~key_padding_mask.all(dim=1)
    return key_padding_mask & has_context.unsqueeze(1), has_context


def without_context(with_context: Tensor, fallback: Tensor, has_context: Tensor) -> Tensor:
    """(T, B, C) states: ``with_context`` where ``has_context`` (B,), else ``fallback``
    (broadcast to the same shape)."""
    return torch.where(has_context.view(1, -1, 1), with_context, fallback)
