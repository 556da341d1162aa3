"""Multi-head attention over context that is well defined for examples without context."""
from typing import Optional, Tuple

from fairseq.modules import MultiheadAttention
from torch import Tensor

from fairseq_ctx.context.modules.empty_context import attendable, without_context


class ContextAttention(MultiheadAttention):
    """Context-source attention MH(h', t) (Yun 2022, eq. 3.6/3.9/3.11) whose output is exactly
    zero for an example whose context keys are all padding (a document-initial sentence),
    instead of the NaN of a softmax over nothing. Such rows attend their (padding) keys
    unmasked and their result is replaced by 0 (:mod:`empty_context`), so gradients stay
    finite and every parameter is still in the graph."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, **kwargs):
        kwargs.setdefault("encoder_decoder_attention", True)
        super().__init__(embed_dim, num_heads, dropout=dropout, **kwargs)

    def forward(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                key_padding_mask: Optional[Tensor] = None, **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
        if key_padding_mask is None:
            return super().forward(query, key, value, key_padding_mask=None, **kwargs)
        mask, has_context = attendable(key_padding_mask)
        out, weights = super().forward(query, key, value, key_padding_mask=mask, **kwargs)
        return without_context(out, out.new_zeros(()), has_context), weights
