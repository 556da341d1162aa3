"""Encoder and decoder of the ``hierarchical_attention_decoder`` architectures (Libovický, 2019, ch. 5)."""
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models import FairseqEncoder
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerEncoderBase
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor

from fairseq_ctx.core.decoder_input import decoder_input
from fairseq_ctx.core.decoder_output import decoder_output
from fairseq_ctx.multisource.aux_input_spec import AuxInput
from fairseq_ctx.multisource.modules.feature_projection import FeatureProjection
from fairseq_ctx.multisource.modules.multi_input_attention import MultiInputAttention


class MultiSourceDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with its cross-attention sub-layer replaced by
    :class:`MultiInputAttention` (serial / parallel / flat / hierarchical, Fig. 5.4)."""

    def __init__(self, cfg, num_inputs: int, combination: str, input_heads: Optional[List[int]] = None,
                 hierarchical_heads: Optional[int] = None):
        super().__init__(cfg, no_encoder_attn=True)
        if self.cross_self_attention or self.c_attn is not None or self.attn_ln is not None:
            raise ValueError("hierarchical_attention_decoder does not support --cross-self-attention / scale-heads / scale-attn")
        self.cross_attention = MultiInputAttention(
            self.embed_dim, cfg.decoder.attention_heads, cfg.encoder.embed_dim, num_inputs, combination,
            dropout=cfg.dropout, attention_dropout=cfg.attention_dropout,
            normalize_before=self.normalize_before, export=cfg.export,
            input_heads=input_heads, hierarchical_heads=hierarchical_heads,
        )

    def forward(self, x, encoder_out: Optional[Tensor] = None, encoder_padding_mask: Optional[Tensor] = None,
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
                prev_self_attn_state=None, prev_attn_state=None, self_attn_mask: Optional[Tensor] = None,
                self_attn_padding_mask: Optional[Tensor] = None, need_attn: bool = False,
                need_head_weights: bool = False, input_sizes: Optional[List[int]] = None,
                padded_inputs: Optional[List[bool]] = None, beam_size: int = 1):
        """fairseq's decoder layer contract, with the inputs' layout (from ``encoder_out``) passed
        on to the cross-attention; the third output is the (B, T, n) weight of each input when
        attention weights are asked for (None otherwise)."""
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=self_attn_padding_mask,
                              incremental_state=incremental_state, need_weights=False, attn_mask=self_attn_mask)
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        attn = input_weights = None
        if encoder_out is not None:
            want_weights = need_attn or need_head_weights or (not self.training and self.need_attn)
            x, attn, input_weights = self.cross_attention(
                x, encoder_out, encoder_padding_mask, incremental_state, need_head_weights=want_weights,
                input_sizes=input_sizes, padded_inputs=padded_inputs, beam_size=beam_size,
                need_input_weights=want_weights,
            )
            if attn is not None and not need_head_weights:
                attn = attn.mean(0)
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.activation_dropout_module(self.activation_fn(self.fc1(x)))
        if self.ffn_layernorm is not None:
            x = self.ffn_layernorm(x)
        x = self.dropout_module(self.fc2(x))
        if self.w_resid is not None:
            residual = torch.mul(self.w_resid, residual)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x, attn, input_weights


class MultiSourceTransformerDecoder(TransformerDecoderBase):
    """fairseq's Transformer decoder built from :class:`MultiSourceDecoderLayer`; passes the
    per-input sizes, which inputs may be padded and the beam size from ``encoder_out`` to each
    layer's call (Libovický 2019, §5.2)."""

    def __init__(self, cfg, dictionary, embed_tokens, num_inputs: int, combination: str,
                 input_heads: Optional[List[int]] = None, hierarchical_heads: Optional[int] = None):
        self.num_inputs = num_inputs
        self.combination = combination
        self.input_heads = input_heads
        self.hierarchical_heads = hierarchical_heads
        super().__init__(cfg, dictionary, embed_tokens)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        if cfg.checkpoint_activations or cfg.offload_activations:
            raise ValueError("hierarchical_attention_decoder does not support --checkpoint-activations")
        return MultiSourceDecoderLayer(cfg, self.num_inputs, self.combination, self.input_heads,
                                       self.hierarchical_heads)

    def extract_features_scriptable(self, prev_output_tokens, encoder_out, incremental_state=None,
                                    full_context_alignment=False, alignment_layer=None, alignment_heads=None):
        """fairseq's decoder pass (embeddings, layers, final norm), each layer given the inputs'
        sizes, which may be padded and the beam size from ``encoder_out``. ``extra`` holds, as in
        fairseq, the head-averaged attention of ``alignment_layer`` (default: the last) and the
        inner states, and ``input_weights``: that layer's (B, T, n) weight of each input."""
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1
        enc = padding_mask = None
        layout = {}
        if encoder_out is not None:
            enc = encoder_out["encoder_out"][0] if len(encoder_out["encoder_out"]) > 0 else None
            if len(encoder_out["encoder_padding_mask"]) > 0:
                padding_mask = encoder_out["encoder_padding_mask"][0]
            layout = {"input_sizes": list(encoder_out.get("input_sizes", [])),
                      "padded_inputs": list(encoder_out.get("padded_inputs", [])),
                      "beam_size": encoder_out.get("beam_size", [1])[0]}
        x, self_attn_padding_mask = self._embed(prev_output_tokens, incremental_state)
        attn = input_weights = None
        inner_states: List[Optional[Tensor]] = [x]
        for idx, layer in enumerate(self.layers):
            self_attn_mask = self.buffered_future_mask(x) if incremental_state is None and not full_context_alignment else None
            x, layer_attn, layer_input_weights = layer(
                x, enc, padding_mask, incremental_state, self_attn_mask=self_attn_mask,
                self_attn_padding_mask=self_attn_padding_mask, need_attn=idx == alignment_layer,
                need_head_weights=idx == alignment_layer, **layout,
            )
            inner_states.append(x)
            if idx == alignment_layer:
                input_weights = layer_input_weights
                if layer_attn is not None:
                    attn = layer_attn.float().to(x)
        x, attn = decoder_output(self, x, attn, alignment_heads)
        return x, {"attn": [attn], "inner_states": inner_states, "input_weights": [input_weights]}

    def _embed(self, prev_output_tokens: Tensor, incremental_state) -> Tuple[Tensor, Optional[Tensor]]:
        """Token and position embeddings (T, B, D) of the tokens still to decode, and their padding mask."""
        x = decoder_input(self, prev_output_tokens, incremental_state)
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        padding = prev_output_tokens.eq(self.padding_idx)
        return x, (padding if padding.any() else None)


class MultiSourceEncoder(FairseqEncoder):
    """The source sentence (fairseq Transformer encoder) plus auxiliary inputs: dense features
    via :class:`FeatureProjection`, extra source sentences via a shared or separate Transformer
    encoder. States of all inputs are concatenated along time; ``input_sizes`` records the split."""

    def __init__(self, args, src_dict, embed_tokens, aux_inputs: List[AuxInput]):
        super().__init__(src_dict)
        self.cfg = TransformerConfig.from_namespace(args)
        self.text_encoder = TransformerEncoderBase(self.cfg, src_dict, embed_tokens)
        self.aux_inputs = aux_inputs
        embed_dim = self.cfg.encoder.embed_dim
        feature_dropout = args.feature_dropout if args.feature_dropout is not None else args.dropout
        self.feature_projections = torch.nn.ModuleDict({
            spec.name: FeatureProjection(spec.dim, spec.regions, embed_dim, not args.no_feature_layernorm,
                                         feature_dropout, not args.no_region_positions)
            for spec in aux_inputs if spec.kind == "feature"
        })
        self.extra_encoders = torch.nn.ModuleDict()
        self.share_extra_encoders = args.share_extra_encoders

    def add_text_encoders(self, dictionaries: Dict[str, object], build_embedding) -> None:
        """One encoder per extra source language (or the source encoder itself when shared)."""
        for spec in self.aux_inputs:
            if spec.kind != "text" or self.share_extra_encoders:
                continue
            dictionary = dictionaries[spec.name]
            if dictionary is self.dictionary:
                embed = self.text_encoder.embed_tokens
            else:
                embed = build_embedding(dictionary, self.cfg.encoder.embed_dim)
            self.extra_encoders[spec.name] = TransformerEncoderBase(self.cfg, dictionary, embed)

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, aux_inputs: Optional[Dict[str, Tensor]] = None,
                return_all_hiddens: bool = False):
        out = self.text_encoder(src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)
        states, masks, padded = [out["encoder_out"][0]], [out["encoder_padding_mask"][0]], [True]
        for spec in self.aux_inputs:
            if aux_inputs is None or spec.name not in aux_inputs:
                raise ValueError(f"the model needs auxiliary input '{spec.name}' in net_input['aux_inputs']; "
                                 f"use --task multimodal_translation with it")
            value = aux_inputs[spec.name]
            if spec.kind == "feature":
                states.append(self.feature_projections[spec.name](value))
                masks.append(torch.zeros(value.shape[:2], dtype=torch.bool, device=value.device))
                padded.append(False)
            else:
                encoder = self.text_encoder if self.share_extra_encoders else self.extra_encoders[spec.name]
                lengths = value.ne(encoder.padding_idx).sum(1)
                extra = encoder(value, src_lengths=lengths)
                states.append(extra["encoder_out"][0])
                masks.append(extra["encoder_padding_mask"][0])
                padded.append(True)
        out = dict(out)
        out["encoder_out"] = [torch.cat(states, 0)]
        out["encoder_padding_mask"] = [torch.cat(masks, 1)]
        out["input_sizes"] = [s.size(0) for s in states]
        out["padded_inputs"] = padded
        return out

    @property
    def source_state_dim(self) -> int:
        return self.cfg.encoder.embed_dim

    def source_states(self, encoder_out: Dict[str, List[Tensor]]) -> Tuple[Tensor, Tensor]:
        """The source sentence's states (B, S, C) and padding mask (B, S), auxiliary inputs left out."""
        length = encoder_out["input_sizes"][0]
        return encoder_out["encoder_out"][0][:length].transpose(0, 1), encoder_out["encoder_padding_mask"][0][:, :length]

    @torch.jit.export
    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        """fairseq's reorder; an expansion into consecutive copies of each sentence (beam search's
        first reorder) multiplies ``beam_size``, which lets the decoder compute keys/values once
        per sentence. Beam search's reorders within each sentence's copies change nothing and
        are skipped (no per-step copy of all states). Like fairseq's beamable attention, this
        relies on beam search's layout: the hypotheses of a sentence in consecutive rows."""
        beam_size = encoder_out.get("beam_size", [1])[0]
        rows = encoder_out["encoder_out"][0].size(1)
        if beam_size > 1 and new_order.numel() == rows:
            own_group = torch.arange(rows, device=new_order.device).div(beam_size, rounding_mode="floor")
            if torch.equal(new_order.div(beam_size, rounding_mode="floor"), own_group):
                return encoder_out
        reordered = self.text_encoder.reorder_encoder_out(encoder_out, new_order)
        for key in ("input_sizes", "padded_inputs"):
            reordered[key] = encoder_out[key]
        if new_order.numel() > rows and new_order.numel() % rows == 0:
            copies = new_order.view(rows, -1)
            if torch.equal(copies, copies[:, :1].expand_as(copies)):
                beam_size *= copies.size(1)
        reordered["beam_size"] = [beam_size]
        return reordered

    def max_positions(self):
        return self.text_encoder.max_positions()
