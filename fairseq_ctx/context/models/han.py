"""Architecture ``han`` (HAN): two-level context-source attention in every encoder layer."""
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import base_architecture
from fairseq.modules import FairseqDropout, LayerNorm
from torch import Tensor, nn

from fairseq_ctx.context.models.context_transformer import ContextModelConfig, ContextTransformerModel
from fairseq_ctx.context.modules.context_attention import ContextAttention
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase
from fairseq_ctx.context.modules.context_gather import gather_slots
from fairseq_ctx.context.modules.empty_context import attendable, without_context
from fairseq_ctx.context.modules.gated_sum import GatedSum
from fairseq_ctx.core.model_options import with_transformer_options


class HanFusionLayer(nn.Module):
    """One HAN fusion step (Yun 2022, eq. 3.11–3.13): word level e_i = MH(h', c_i) for every
    context sentence i (query = source words); sentence level t^j = MH(h'^j, [e_0^j..e_{N-1}^j])
    over the N per-word context vectors, followed by FFN + residual + LayerNorm; then
    h = GatedSum(h', t). Empty slots are masked at both levels."""

    def __init__(self, embed_dim: int, ffn_dim: int, heads: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.word_attn = ContextAttention(embed_dim, heads, dropout=attention_dropout)
        self.sentence_attn = ContextAttention(embed_dim, heads, dropout=attention_dropout)
        self.ffn = nn.Sequential(nn.Linear(embed_dim, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, embed_dim))
        self.ffn_norm = LayerNorm(embed_dim)
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.gated_sum = GatedSum(embed_dim)

    def forward(self, x: Tensor, context: Tensor, context_padding: Tensor, context_index: Tensor) -> Tensor:
        """x: (Ls, B, C) source states; context: (Lc, U, C) states of the unique context
        sentences, context_padding (U, Lc); context_index (B, N). Returns (Ls, B, C)."""
        length, batch, dim = x.shape
        slots, slot_padding = gather_slots(context.transpose(0, 1), context_padding, context_index)
        num_slots, context_length = slots.size(1), slots.size(2)
        keys = slots.reshape(batch * num_slots, context_length, dim).transpose(0, 1)
        queries = x.unsqueeze(2).expand(length, batch, num_slots, dim).reshape(length, batch * num_slots, dim)
        words, _ = self.word_attn(query=queries, key=keys, value=keys,
                                  key_padding_mask=slot_padding.reshape(batch * num_slots, context_length),
                                  need_weights=False)
        per_word = words.view(length, batch, num_slots, dim).permute(2, 0, 1, 3).reshape(num_slots, length * batch, dim)
        empty = context_index.lt(0).unsqueeze(0).expand(length, batch, num_slots).reshape(length * batch, num_slots)
        t, _ = self.sentence_attn(query=x.reshape(1, length * batch, dim), key=per_word, value=per_word,
                                  key_padding_mask=empty, need_weights=False)
        t = t.view(length, batch, dim)
        t = self.ffn_norm(t + self.dropout(self.ffn(t)))
        return self.gated_sum(x, self.dropout(t))


class HanEncoder(ContextEncoderBase):
    """HAN encoder: layer l runs on the source and, with the same weights, on each distinct
    context sentence (c^l); then a :class:`HanFusionLayer` fuses c^l into the
    source states. Sentences without context keep the layer's sentence-level output."""

    def __init__(self, cfg, args, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.han_layers = nn.ModuleList(
            HanFusionLayer(cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads,
                                       cfg.dropout, cfg.attention_dropout)
            for _ in range(cfg.encoder.layers)
        )

    def encode(self, src_tokens, context_tokens, context_index, token_embeddings):
        x, padding, embedding = self.embed(src_tokens, token_embeddings)
        c, context_padding, _ = self.embed(context_tokens)
        _, has_context = attendable(context_index.lt(0))
        for layer, han in zip(self.layers, self.han_layers):
            x = layer(x, encoder_padding_mask=padding)
            c = layer(c, encoder_padding_mask=context_padding)
            x = without_context(han(x, c, context_padding, context_index), x, has_context)
        return x, padding, embedding, src_tokens


@register_model("hierarchical_attention_transformer", dataclass=with_transformer_options(ContextModelConfig))
class HanTransformer(ContextTransformerModel):
    """HAN baseline: hierarchical (word, then sentence) context attention in every encoder layer."""

    encoder_class = HanEncoder


@register_model_architecture("hierarchical_attention_transformer", "han")
def han_architecture(args):
    """HAN with Transformer-base sizes (512, 6+6 layers, 8 heads, dropout 0.1)."""
    base_architecture(args)
