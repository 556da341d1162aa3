"""Architectures ``tmde``, ``tmde_p``, ``tmde_f`` and ``ct_mde``: Transformer multilingual
document embedding models (Li 2021, ch. 4)."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase, TransformerModel
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_vaswani_wmt_en_de_big
from torch import Tensor

from fairseq_ctx.core.length_chunks import SinglePass
from fairseq_ctx.core.model_options import TransformerOptions, arch_overrides, with_transformer_options
from fairseq_ctx.embedding.no_hub_interface import no_hub_interface
from fairseq_ctx.embedding.pyramid_queries import PyramidQueryPooling, attend_with_layer


@dataclass
class TmdeConfig(FairseqDataclass):
    """Options of the T-MDE family (Li 2021, ch. 4) beyond fairseq's Transformer."""
    full_encoder_attention: bool = field(
        default=False,
        metadata={"help": "T-MDE_F ablation: the decoder attends to all encoder outputs, not only P (set by --arch tmde_f)"},
    )
    pyramid_queries: str = field(
        default="",
        metadata={"help": "T-MDE_P: comma-separated query counts per level, e.g. 32,16,8 (eq. 4.8-4.13; "
                  "--arch tmde_p's default); empty = P is the STR_TAG output"},
    )


class EmbeddingTransformerEncoder(TransformerEncoderBase, SinglePass):
    """fairseq's Transformer encoder whose output also carries the sentence embedding P.

    P = H^L[0], the output at the STR_TAG position (eq. 4.3–4.5), or the pyramid pooling of
    T-MDE_P. With ``bottleneck`` the encoder output handed to the decoder is P alone (one
    key/value for encoder-decoder attention, Fig. 4.1) — also during fairseq-generate.

    When nothing reads H^L beyond position 0, the last layer runs at position 0 only (exact, and
    most of a layer cheaper); :meth:`use_single_pass` turns that off for hooks on its attention.
    """

    def __init__(self, cfg: TransformerConfig, dictionary, embed_tokens, bottleneck: bool,
                 pyramid_queries: Optional[List[int]] = None):
        super().__init__(cfg, dictionary, embed_tokens)
        self.bottleneck = bottleneck
        self.position_zero_last_layer = True
        self.pyramid = None
        if pyramid_queries:
            self.pyramid = PyramidQueryPooling(
                cfg.encoder.embed_dim, cfg.encoder.attention_heads, cfg.encoder.ffn_embed_dim, pyramid_queries,
                dropout=cfg.dropout, activation_fn=cfg.activation_fn,
            )
            self.pyramid.first_layer(len(self.layers))

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, return_all_hiddens: bool = False,
                token_embeddings: Optional[Tensor] = None) -> Dict[str, List[Tensor]]:
        full_last_layer = return_all_hiddens or not self.bottleneck or self._pyramid_reads_last_layer()
        states, last, padding, token_embedding = self._encode(src_tokens, token_embeddings, full_last_layer)
        embedding = self._embedding(states, last, padding)
        return {
            "encoder_out": [embedding.unsqueeze(0) if self.bottleneck else last],
            "encoder_padding_mask": [] if self.bottleneck else [padding],
            "encoder_embedding": [token_embedding],
            "encoder_states": states if return_all_hiddens else [],
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)],
            "sentence_embedding": [embedding],
        }

    def sentence_embedding(self, src_tokens: Tensor) -> Tensor:
        """P alone (B, C), computing the last layer at position 0 only where P allows it."""
        states, last, padding, _ = self._encode(src_tokens, None, self._pyramid_reads_last_layer())
        return self._embedding(states, last, padding)

    def use_single_pass(self) -> None:
        """Run the last layer over every position (:class:`SinglePass`), so that its attention
        module is called like every other."""
        self.position_zero_last_layer = False

    def _pyramid_reads_last_layer(self) -> bool:
        return self.pyramid is not None and self.pyramid.first_layer(len(self.layers)) == len(self.layers)

    def _encode(self, src_tokens: Tensor, token_embeddings: Optional[Tensor], full_last_layer: bool):
        """fairseq's encoder loop (forward_scriptable). Without ``full_last_layer`` the last layer
        computes its queries, FFN and norms for position 0 only (keys/values still cover every
        position): exact whenever nothing reads H^L beyond P = H^L[0], and it saves most of one
        layer in every pass. Returns (H^0..H^L with H^0 the embedded input, final output,
        padding mask (B, T), token embedding)."""
        padding = src_tokens.eq(self.padding_idx)
        has_pads = bool(padding.any())
        x, token_embedding = self.forward_embedding(src_tokens, token_embeddings)
        if has_pads:
            x = x * (1 - padding.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)
        mask = padding if has_pads else None
        states = [x]
        last_layer = self.layers[len(self.layers) - 1]
        for layer in self.layers:  # LayerDropModuleList may skip layers in training
            if layer is last_layer and not full_last_layer and self.position_zero_last_layer:
                x = attend_with_layer(layer, x[:1], x, mask)
            else:
                x = layer(x, encoder_padding_mask=mask)
            states.append(x)
        last = self.layer_norm(x) if self.layer_norm is not None else x
        return states, last, padding, token_embedding

    def _embedding(self, states: List[Tensor], last: Tensor, padding: Tensor) -> Tensor:
        if self.pyramid is None:
            return last[0]
        return self.pyramid(states[1:], last, padding if padding.any() else None, self.layers)

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        reordered["sentence_embedding"] = [encoder_out["sentence_embedding"][0].index_select(0, new_order)]
        return reordered


@register_model("transformer_mde", dataclass=with_transformer_options(TmdeConfig))
class TransformerMDE(TransformerOptions, TransformerModel):
    """T-MDE family (Li 2021, ch. 4): shared encoder, small decoder, sentence embedding ``embed()``."""

    task_name = "multilingual_embedding"  # checked by the tasks (fairseq_ctx.core.model_family)
    options = TmdeConfig

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        no_hub_interface("transformer_mde (tmde, tmde_p, tmde_f, ct_mde)")

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        queries = [int(q) for q in str(args.pyramid_queries).split(",") if q.strip()]
        return EmbeddingTransformerEncoder(
            TransformerConfig.from_namespace(args), src_dict, embed_tokens,
            bottleneck=not args.full_encoder_attention, pyramid_queries=queries,
        )

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor,
                return_all_hiddens: bool = False, features_only: bool = False,
                alignment_layer: Optional[int] = None, alignment_heads: Optional[int] = None):
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)
        x, extra = self.decoder(prev_output_tokens, encoder_out=encoder_out, features_only=features_only,
                                alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                                src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)
        extra["sentence_embedding"] = encoder_out["sentence_embedding"][0]
        return x, extra

    def embed(self, src_tokens: Tensor, src_lengths: Tensor) -> Tensor:
        """Sentence/document embeddings (B, d) of STR_TAG-prefixed, right-padded sources."""
        return self.encoder.sentence_embedding(src_tokens)


def _tmde_sizes(args):
    """Transformer-base sizes with the thesis' one decoder layer and shared embeddings (Table 4.1)."""
    arch_overrides(args, decoder_layers=1, share_all_embeddings=True)
    base_architecture(args)


@register_model_architecture("transformer_mde", "tmde")
def tmde(args):
    """T-MDE: P = H^L[0]; the decoder's encoder-decoder attention sees only P."""
    _tmde_sizes(args)


@register_model_architecture("transformer_mde", "tmde_f")
def tmde_f(args):
    """T-MDE_F: full encoder-decoder attention (no bottleneck), P still H^L[0]."""
    args.full_encoder_attention = True
    _tmde_sizes(args)


@register_model_architecture("transformer_mde", "tmde_p")
def tmde_p(args):
    """T-MDE_P: pyramid learnable queries 32/16/8 + layer aggregation (eq. 4.8–4.17)."""
    arch_overrides(args, pyramid_queries="32,16,8")
    tmde(args)


@register_model_architecture("transformer_mde", "ct_mde")
def ct_mde(args):
    """Thesis-size T-MDE (Table 4.1): 1024 dims, 16 heads, FFN 4096, 6 enc / 1 dec, pre-norm,
    dropout 0.3, and, as in fairseq's transformer_vaswani_wmt_en_de_big the thesis started from,
    separate encoder, decoder and output embedding tables (with a 50K vocabulary: 246M parameters,
    Table 4.1's count); the "c" means training with ``--criterion distance_constraint``."""
    arch_overrides(args, encoder_normalize_before=True, decoder_normalize_before=True, decoder_layers=1)
    transformer_vaswani_wmt_en_de_big(args)
