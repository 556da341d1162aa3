"""Architecture ``dat`` (DAT): shared lower encoder layers for the context, gated fusion on top."""
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import base_architecture
from fairseq.modules import FairseqDropout

from fairseq_ctx.context.models.context_transformer import ContextModelConfig, ContextTransformerModel
from fairseq_ctx.context.modules.context_attention import ContextAttention
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase
from fairseq_ctx.context.modules.context_gather import concatenated_context
from fairseq_ctx.context.modules.empty_context import attendable, without_context
from fairseq_ctx.context.modules.gated_sum import GatedSum
from fairseq_ctx.core.model_options import with_transformer_options


class DocumentAwareEncoder(ContextEncoderBase):
    """DAT (Yun 2022, eq. 3.5–3.8). The context sentences pass the source encoder's first L-1
    layers (shared weights; each distinct sentence once per batch); their token states are
    concatenated per example (c_0 first) into t. The last layer computes
    h_src = Layer_L(h') (self-attention + FFN), h_ctx = MH(h', t) and h = GatedSum(h_src, h_ctx).
    A sentence without context gets exactly the sentence-level encoding h_src."""

    def __init__(self, cfg, args, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        embed_dim = cfg.encoder.embed_dim
        self.context_attn = ContextAttention(embed_dim, cfg.encoder.attention_heads, dropout=cfg.attention_dropout)
        self.context_dropout = FairseqDropout(cfg.dropout, module_name=self.__class__.__name__)
        self.gated_sum = GatedSum(embed_dim)

    def encode(self, src_tokens, context_tokens, context_index, token_embeddings):
        x, padding, embedding = self.embed(src_tokens, token_embeddings)
        c, context_padding, _ = self.embed(context_tokens)
        for layer in self.layers[:-1]:
            x = layer(x, encoder_padding_mask=padding)
            c = layer(c, encoder_padding_mask=context_padding)
        h_src = self.layers[-1](x, encoder_padding_mask=padding)
        t, t_padding = concatenated_context(c.transpose(0, 1), context_padding, context_index)
        t = t.transpose(0, 1)
        h_ctx, _ = self.context_attn(query=x, key=t, value=t, key_padding_mask=t_padding, need_weights=False)
        fused = self.gated_sum(h_src, self.context_dropout(h_ctx))
        _, has_context = attendable(context_index.lt(0))
        return without_context(fused, h_src, has_context), padding, embedding, src_tokens


@register_model("document_aware_transformer", dataclass=with_transformer_options(ContextModelConfig))
class DocumentAwareTransformer(ContextTransformerModel):
    """DAT baseline: context encoder sharing the first L-1 source layers, gated sum at the top."""

    encoder_class = DocumentAwareEncoder


@register_model_architecture("document_aware_transformer", "dat")
def dat_architecture(args):
    """DAT with Transformer-base sizes (512, 6+6 layers, 8 heads, dropout 0.1)."""
    base_architecture(args)
