"""fairseq's Transformer decoder with the previous target sentences as a forced, loss-free prefix."""
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerDecoderBase
from torch import Tensor, nn

from fairseq_ctx.context.modules.empty_context import attendable
from fairseq_ctx.core.decoder_output import decoder_output

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class TargetPrefixDecoder(TransformerDecoderBase):
    """TwC (Yun 2022, §3.2.1) with target-side context: the target half of the concatenation
    of Tiedemann & Scherrer (2017), here a forced prefix that is not predicted. The decoder reads
    ``[<boc>] t_{-M} .. [<boc>] t_{-1}`` (oldest first, the encoder's
    ``encoder_out["target_prefix"]``, (B, P) right-padded) before the current sentence.

    The prefix is run through the decoder layers first, filling their self-attention caches
    (keys/values and the prefix's padding mask); the current sentence then runs exactly as in
    fairseq's decoder, attending the cached prefix. So the output, ``extra["attn"]`` and
    ``inner_states`` cover the current sentence only (criterions, beam search and reference
    scoring are unchanged and the prefix carries no loss), incremental decoding fills the cache
    on its first step, and a row without target context attends nothing of its (all padding)
    prefix. The current sentence keeps the sentence-level decoder's positions; the prefix has
    its own positions plus a learned target-context segment vector. Without ``target_prefix``
    in ``encoder_out`` (--target-context-size 0) this is fairseq's decoder, parameters included.

    Outside incremental decoding, ``extra`` also carries ``prefix_tokens`` (B, P) and
    ``prefix_states`` (P, B, C), the last layer's states over the prefix, from which a criterion
    can predict the prefix too (focused concatenation's discounted context loss, Lupo et al.,
    2022: :mod:`fairseq_ctx.context.context_discounted_loss`); the default criterions ignore them.
    """

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn: bool = False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn, output_projection=output_projection)
        self.target_context_segment: Optional[nn.Parameter] = None

    def read_target_context(self) -> None:
        """Add the target-context segment vector (called when --target-context-size > 0). The
        prefix pass and the sentence pass must see the same layers with one cache, which
        activation checkpointing (re-running a layer in the backward pass) and LayerDrop
        (dropping a layer in one pass only) would break: both are refused."""
        if self.cfg.checkpoint_activations or self.cfg.decoder.layerdrop > 0:
            raise ValueError(
                "ctx_concat with --target-context-size > 0 cannot use --checkpoint-activations or "
                "--decoder-layerdrop (the target prefix is cached once per layer); drop those options "
                "or use --target-context-size 0"
            )
        self.target_context_segment = nn.Parameter(torch.empty(self.embed_dim))
        nn.init.normal_(self.target_context_segment, mean=0.0, std=self.embed_dim ** -0.5)

    def extract_features_scriptable(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[IncrementalState] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        prefix = encoder_out.get("target_prefix") if encoder_out is not None else None
        if not prefix:
            return super().extract_features_scriptable(
                prev_output_tokens, encoder_out, incremental_state, full_context_alignment, alignment_layer, alignment_heads
            )
        if incremental_state is not None:
            if not self.layers[0].self_attn._get_input_buffer(incremental_state):
                self.run_prefix(prefix[0], encoder_out, incremental_state)
            return super().extract_features_scriptable(
                prev_output_tokens, encoder_out, incremental_state, full_context_alignment, alignment_layer, alignment_heads
            )
        state: IncrementalState = {}
        prefix_states = self.run_prefix(prefix[0], encoder_out, state)
        x, extra = self.sentence_after_prefix(
            prev_output_tokens, encoder_out, state, prefix[0].size(1), full_context_alignment, alignment_layer, alignment_heads
        )
        extra["prefix_tokens"], extra["prefix_states"] = [prefix[0]], [prefix_states]
        return x, extra

    def embed(self, tokens: Tensor, segment: Optional[Tensor]) -> Tensor:
        """(B, T) tokens → (T, B, C) decoder input, as fairseq's decoder embeds a full sentence,
        plus ``segment`` (the target-context vector) when given."""
        x = self.embed_scale * self.embed_tokens(tokens)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        if self.embed_positions is not None:
            x = x + self.embed_positions(tokens)
        if segment is not None:
            x = x + segment.to(x)
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        return self.dropout_module(x).transpose(0, 1)

    def run_prefix(self, prefix: Tensor, encoder_out: Dict[str, List[Tensor]], state: IncrementalState) -> Tensor:
        """Fill ``state``'s self-attention caches with the prefix (B, P) and return the last
        layer's states over it (P, B, C). Rows whose prefix is all padding attend it unmasked
        here (finite values, no NaN); the cached padding mask is the true one, so the sentence
        never attends their padding."""
        if prefix.size(1) > self.max_target_positions:
            raise ValueError(
                f"ctx_concat: the target-context prefix has {prefix.size(1)} tokens, more than "
                f"--max-target-positions {self.max_target_positions}; lower --target-context-size or "
                f"--max-context-tokens"
            )
        padding = prefix.eq(self.padding_idx)
        attend, _ = attendable(padding)
        enc, enc_padding = encoder_states(encoder_out)
        x = self.embed(prefix, self.target_context_segment)
        future = self.buffered_future_mask(x)
        for layer in self.layers:
            x, _, _ = layer(x, enc, enc_padding, state, self_attn_mask=future, self_attn_padding_mask=attend)
            cache = layer.self_attn._get_input_buffer(state)
            cache["prev_key_padding_mask"] = padding
            layer.self_attn._set_input_buffer(state, cache)
        return x

    def sentence_after_prefix(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Dict[str, List[Tensor]],
        state: IncrementalState,
        prefix_length: int,
        full_context_alignment: bool,
        alignment_layer: Optional[int],
        alignment_heads: Optional[int],
    ) -> Tuple[Tensor, Dict[str, List[Optional[Tensor]]]]:
        """All positions of the current sentence in one pass over the cached prefix: fairseq's
        full-sentence decoder whose self-attention also sees the prefix keys."""
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1
        enc, enc_padding = encoder_states(encoder_out)
        x = self.embed(prev_output_tokens, None)
        padding = prev_output_tokens.eq(self.padding_idx)
        self_attn_padding_mask = padding if self.cross_self_attention or padding.any() else None
        self_attn_mask = None
        if not full_context_alignment:
            future = self.buffered_future_mask(x)
            self_attn_mask = torch.cat([future.new_zeros(future.size(0), prefix_length), future], dim=1)
        attn: Optional[Tensor] = None
        inner_states: List[Optional[Tensor]] = [x]
        for index, layer in enumerate(self.layers):
            x, layer_attn, _ = layer(
                x, enc, enc_padding, state, self_attn_mask=self_attn_mask, self_attn_padding_mask=self_attn_padding_mask,
                need_attn=index == alignment_layer, need_head_weights=index == alignment_layer,
            )
            inner_states.append(x)
            if layer_attn is not None and index == alignment_layer:
                attn = layer_attn.float().to(x)
        x, attn = decoder_output(self, x, attn, alignment_heads)
        return x, {"attn": [attn], "inner_states": inner_states}


def encoder_states(encoder_out: Dict[str, List[Tensor]]) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """The encoder states and their padding mask, as fairseq's decoder reads them."""
    enc = encoder_out["encoder_out"][0] if len(encoder_out["encoder_out"]) > 0 else None
    padding = encoder_out["encoder_padding_mask"][0] if len(encoder_out["encoder_padding_mask"]) > 0 else None
    return enc, padding
