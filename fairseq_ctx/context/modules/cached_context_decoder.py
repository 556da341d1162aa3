"""fairseq's Transformer decoder with one more cross-attention sublayer per layer, over cached
context states that the encoder hands over as ``encoder_out["context_out"]``."""
from typing import Callable, Dict, List, Optional, Tuple

from fairseq.models.transformer import TransformerDecoderBase
from fairseq.modules import LayerNorm
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor

from fairseq_ctx.context.modules.empty_context import attendable, without_context
from fairseq_ctx.context.modules.target_prefix_decoder import encoder_states
from fairseq_ctx.core.decoder_input import decoder_input
from fairseq_ctx.core.decoder_output import decoder_output

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class CachedContextDecoderLayer(TransformerDecoderLayerBase):
    """Decoder layer of the caching models (Mąka et al., 2024, caching multi-encoder): self-attention,
    attention over the current sentence's encoder states, then a context attention over the
    cached context states (own weights and LayerNorm, residual + dropout like the others), then
    the FFN. A row without context skips the context sublayer, so it is computed exactly as in
    the sentence-level decoder layer. fairseq's optional head/attention/residual scaling and
    cross-self-attention are not supported."""

    def __init__(self, cfg, no_encoder_attn: bool = False):
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)
        if self.cross_self_attention or self.c_attn is not None or self.attn_ln is not None or self.w_resid is not None:
            raise ValueError("the caching models do not support cross-self-attention or head/attention/residual scaling")
        self.context_attn = self.build_encoder_attention(self.embed_dim, cfg)
        self.context_attn_layer_norm = LayerNorm(self.embed_dim, export=cfg.export)

    def sublayer(self, x: Tensor, norm: LayerNorm, function: Callable[[Tensor], Tensor]) -> Tensor:
        """Residual sublayer with fairseq's pre-/post-LayerNorm placement."""
        residual = x
        if self.normalize_before:
            x = norm(x)
        x = self.residual_connection(self.dropout_module(function(x)), residual)
        return x if self.normalize_before else norm(x)

    def feed_forward(self, x: Tensor) -> Tensor:
        x = self.activation_dropout_module(self.activation_fn(self.fc1(x)))
        if self.ffn_layernorm is not None:
            x = self.ffn_layernorm(x)
        return self.fc2(x)

    def forward(
        self,
        x: Tensor,
        encoder_out: Optional[Tensor],
        encoder_padding_mask: Optional[Tensor],
        context: Tensor,
        context_padding_mask: Tensor,
        has_context: Tensor,
        incremental_state: Optional[IncrementalState] = None,
        self_attn_mask: Optional[Tensor] = None,
        self_attn_padding_mask: Optional[Tensor] = None,
        need_attn: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x: (T, B, C); context: (S, B, C) with ``context_padding_mask`` (B, S) already made
        attendable (:func:`attendable`) and ``has_context`` (B,). Returns x and the encoder
        attention weights (as fairseq's layer)."""
        x = self.sublayer(x, self.self_attn_layer_norm, lambda h: self.self_attn(
            query=h, key=h, value=h, key_padding_mask=self_attn_padding_mask, incremental_state=incremental_state,
            need_weights=False, attn_mask=self_attn_mask)[0])
        attn: Optional[Tensor] = None
        if self.encoder_attn is not None and encoder_out is not None:
            def encoder_attention(h: Tensor) -> Tensor:
                nonlocal attn
                out, attn = self.encoder_attn(
                    query=h, key=encoder_out, value=encoder_out, key_padding_mask=encoder_padding_mask,
                    incremental_state=incremental_state, static_kv=True,
                    need_weights=need_attn or (not self.training and self.need_attn), need_head_weights=need_head_weights)
                return out

            x = self.sublayer(x, self.encoder_attn_layer_norm, encoder_attention)
        with_context = self.sublayer(x, self.context_attn_layer_norm, lambda h: self.context_attn(
            query=h, key=context, value=context, key_padding_mask=context_padding_mask,
            incremental_state=incremental_state, static_kv=True, need_weights=False)[0])
        x = without_context(with_context, x, has_context)
        return self.sublayer(x, self.final_layer_norm, self.feed_forward), attn


class CachedContextDecoder(TransformerDecoderBase):
    """The caching models' decoder (Mąka et al., 2024): fairseq's decoder whose layers are
    :class:`CachedContextDecoderLayer`, reading ``encoder_out["context_out"]`` (S, B, C) and
    ``encoder_out["context_padding_mask"]`` (B, S). Incremental decoding caches the projected
    context keys/values per layer (static, as the encoder attention's)."""

    def build_decoder_layer(self, cfg, no_encoder_attn: bool = False):
        if cfg.checkpoint_activations:
            raise ValueError("the caching models do not support --checkpoint-activations")
        return CachedContextDecoderLayer(cfg, no_encoder_attn)

    def extract_features_scriptable(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[IncrementalState] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1
        enc, enc_padding = encoder_states(encoder_out)
        context = encoder_out["context_out"][0]
        context_padding, has_context = attendable(encoder_out["context_padding_mask"][0])
        x = decoder_input(self, prev_output_tokens, incremental_state)
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        padding = prev_output_tokens.eq(self.padding_idx)
        self_attn_padding_mask = padding if padding.any() else None
        attn: Optional[Tensor] = None
        inner_states: List[Optional[Tensor]] = [x]
        for index, layer in enumerate(self.layers):
            self_attn_mask = self.buffered_future_mask(x) if incremental_state is None and not full_context_alignment else None
            x, layer_attn = layer(
                x, enc, enc_padding, context, context_padding, has_context, incremental_state,
                self_attn_mask=self_attn_mask, self_attn_padding_mask=self_attn_padding_mask,
                need_attn=index == alignment_layer, need_head_weights=index == alignment_layer,
            )
            inner_states.append(x)
            if layer_attn is not None and index == alignment_layer:
                attn = layer_attn.float().to(x)
        x, attn = decoder_output(self, x, attn, alignment_heads)
        return x, {"attn": [attn], "inner_states": inner_states}
