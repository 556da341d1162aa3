"""The start of fairseq's Transformer decoder pass, for decoders that run their own layer loop."""
from typing import Dict, Optional

from torch import Tensor


def decoder_input(decoder, prev_output_tokens: Tensor, incremental_state: Optional[Dict]) -> Tensor:
    """As ``TransformerDecoderBase.extract_features_scriptable`` begins: (B, T) tokens → (T, B, C)
    token embeddings scaled, plus positions, quant-noise, input projection, LayerNorm and dropout;
    only the last position when decoding incrementally."""
    positions = None
    if decoder.embed_positions is not None:
        positions = decoder.embed_positions(prev_output_tokens, incremental_state=incremental_state)
    if incremental_state is not None:
        prev_output_tokens = prev_output_tokens[:, -1:]
        if positions is not None:
            positions = positions[:, -1:]
    x = decoder.embed_scale * decoder.embed_tokens(prev_output_tokens.contiguous())
    if decoder.quant_noise is not None:
        x = decoder.quant_noise(x)
    if decoder.project_in_dim is not None:
        x = decoder.project_in_dim(x)
    if positions is not None:
        x = x + positions
    if decoder.layernorm_embedding is not None:
        x = decoder.layernorm_embedding(x)
    return decoder.dropout_module(x).transpose(0, 1)
