"""The end of fairseq's Transformer decoder pass, for decoders that run their own layer loop."""
from typing import Optional, Tuple

from torch import Tensor


def decoder_output(decoder, x: Tensor, attn: Optional[Tensor], alignment_heads: Optional[int]) -> Tuple[Tensor, Optional[Tensor]]:
    """As ``TransformerDecoderBase.extract_features_scriptable`` ends: the alignment layer's
    attention averaged over its first ``alignment_heads`` heads, the final layer norm, (T, B, C)
    states to (B, T, C) and the output projection to the embedding size."""
    if attn is not None:
        attn = (attn[:alignment_heads] if alignment_heads is not None else attn).mean(dim=0)
    if decoder.layer_norm is not None:
        x = decoder.layer_norm(x)
    x = x.transpose(0, 1)
    if decoder.project_out_dim is not None:
        x = decoder.project_out_dim(x)
    return x, attn
