"""Multi-head attention over context that is well defined for examples without context."""
from typing import Optional, Tuple

from fairseq.modules import MultiheadAttention
from torch import Tensor


class ContextAttention(MultiheadAttention):
    """Context-source attention MH(h', t) (Yun 2022, eq. 3.6/3.9/3.11) whose output is exactly
    zero for an example whose context keys are all padding (a document-initial sentence),
    instead of the NaN of a softmax over nothing. Such rows attend their (padding) keys
    unmasked and the result is multiplied by 0, so gradients stay finite and every parameter
    is still in the graph."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, **kwargs):
        kwargs.setdefault("encoder_decoder_attention", True)
        super().__init__(embed_dim, num_heads, dropout=dropout, **kwargs)

    def forward(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                key_padding_mask: Optional[Tensor] = None, **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
        if key_padding_mask is None:
            return super().forward(query, key, value, key_padding_mask=None, **kwargs)
        empty = key_padding_mask.all(dim=1)
        mask = key_padding_mask & ~empty.unsqueeze(1)
        out, weights = super().forward(query, key, value, key_padding_mask=mask, **kwargs)
        return out * (~empty).view(1, -1, 1).to(out.dtype), weights
