"""Architecture ``dct`` (DCT): context-source attention + FFN in every source encoder layer."""
from dataclasses import dataclass, field
from typing import Optional

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import base_architecture
from fairseq.modules import LayerNorm
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import nn

from fairseq_ctx.context.models.context_transformer import ContextTransformerModel
from fairseq_ctx.context.modules.context_attention import ContextAttention
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase, encoder_sized_decoder_config
from fairseq_ctx.context.modules.context_gather import concatenated_context
from fairseq_ctx.context.sentence_init import SentenceInitConfig
from fairseq_ctx.core.model_options import with_transformer_options


@dataclass
class DctConfig(SentenceInitConfig):
    """Options of DCT (Yun 2022, eq. 3.9–3.10) beyond fairseq's Transformer."""
    context_encoder_layers: Optional[int] = field(
        default=None,
        metadata={"help": "layers of DCT's own context encoder (not shared with the source encoder, "
                  "as in the thesis); default: --encoder-layers"},
    )


class ContextSourceLayer(TransformerDecoderLayerBase):
    """One DCT source layer (Yun 2022, eq. 3.9–3.10): self-attention over the source (no causal
    mask), context-source attention h_ctx = MH(h', t), then the position-wise FFN, each with
    fairseq's residual + LayerNorm. fairseq's decoder layer provides exactly this order; its
    cross-attention is a :class:`ContextAttention`, so a sentence without context skips it
    (zero attention output)."""

    def upgrade_state_dict_named(self, state_dict, name):
        """Nothing to upgrade (the encoder calls this on every layer when loading a checkpoint)."""

    def build_encoder_attention(self, embed_dim, cfg):
        return ContextAttention(embed_dim, cfg.decoder.attention_heads, kdim=cfg.encoder.embed_dim,
                                vdim=cfg.encoder.embed_dim, dropout=cfg.attention_dropout)


class DocumentContextEncoder(ContextEncoderBase):
    """DCT encoder: a separate Transformer encoder (shared embeddings, own layers) encodes each
    distinct context sentence once; the token states of an example's context sentences are
    concatenated (c_0 first) into t, which every source layer attends. Cost
    O(N·Lc·Ls + Ls² + N·Lc²) per layer."""

    def __init__(self, cfg, args, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        num_context_layers = args.context_encoder_layers or cfg.encoder.layers
        self.context_layers = nn.ModuleList(TransformerEncoderLayerBase(cfg) for _ in range(num_context_layers))
        self.context_layer_norm = LayerNorm(cfg.encoder.embed_dim) if cfg.encoder.normalize_before else None

    def build_encoder_layer(self, cfg):
        return ContextSourceLayer(encoder_sized_decoder_config(cfg))

    def encode(self, src_tokens, context_tokens, context_index, token_embeddings):
        c, context_padding, _ = self.embed(context_tokens)
        for layer in self.context_layers:
            c = layer(c, encoder_padding_mask=context_padding)
        if self.context_layer_norm is not None:
            c = self.context_layer_norm(c)
        t, t_padding = concatenated_context(c.transpose(0, 1), context_padding, context_index)
        t = t.transpose(0, 1)
        x, padding, embedding = self.embed(src_tokens, token_embeddings)
        for layer in self.layers:
            x, _, _ = layer(x, encoder_out=t, encoder_padding_mask=t_padding, self_attn_padding_mask=padding)
        return x, padding, embedding, src_tokens


@register_model("document_context_transformer", dataclass=with_transformer_options(DctConfig))
class DocumentContextTransformer(ContextTransformerModel):
    """DCT baseline: every source encoder layer attends the encoded context."""

    encoder_class = DocumentContextEncoder
    options = DctConfig


@register_model_architecture("document_context_transformer", "dct")
def dct_architecture(args):
    """DCT with Transformer-base sizes (512, 6+6 layers, 8 heads, dropout 0.1)."""
    base_architecture(args)
