"""Architectures ``ctx_concat`` (TwC) and ``focused_concat`` (Lupo et al., 2022): source and
context sentences as one encoder input."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, base_architecture
from fairseq.modules import SinusoidalPositionalEmbedding
from fairseq.utils import make_positions
from torch import Tensor, nn

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.models.context_transformer import ContextTransformerModel
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase
from fairseq_ctx.context.modules.context_gather import compact, gather_slots
from fairseq_ctx.context.modules.empty_context import context_or_placeholder
from fairseq_ctx.context.modules.target_context import check_target_slots
from fairseq_ctx.context.modules.target_prefix_decoder import TargetPrefixDecoder
from fairseq_ctx.context.sentence_init import SentenceInitConfig
from fairseq_ctx.core.model_options import with_transformer_options


@dataclass
class ConcatContextConfig(SentenceInitConfig):
    """Options of TwC (Yun 2022, §3.2.1) beyond fairseq's Transformer."""
    max_context_sentences: int = field(
        default=10,
        metadata={"help": "number of learned context segment embeddings (segment 0 is the source, "
                  "segment i+1 context slot i); must be >= --context-size (the thesis uses up to 10)"},
    )
    position_shift: Optional[int] = field(
        default=None,
        metadata={"help": "segment-shifted positions (Lupo et al., 2022): the positions of each segment of the "
                  "concatenation run on from the previous one's plus this many, so sentence boundaries are also "
                  "distances; 0 = off. Default: 0 for ctx_concat, 21 for focused_concat (the authors' IWSLT17 "
                  "en-de setting); needs fairseq's sinusoidal positions"},
    )


class ConcatContextEncoder(ContextEncoderBase):
    """TwC (Yun 2022, §3.2.1 baselines): the encoder input is [x, c_0, .., c_{N-1}] — the source
    followed by its context sentences, nearest first, each starting with ``<boc>`` (the
    separator symbol) — with fairseq's positions running over the whole concatenation plus a
    learned segment embedding (0 = source, i+1 = context slot i). The decoder attends the whole
    concatenation; self-attention costs O((Ls + N·Lc)²). A sentence without context is encoded
    as the source alone. ``token_embeddings`` is not supported (the input is re-tokenised).

    With --target-context-size M > 0 the encoder also hands the decoder its target prefix
    ``encoder_out["target_prefix"]``: the previous target sentences of each example, oldest
    first, ``[<boc>] t_{-M} .. [<boc>] t_{-1}`` (B, P) right-padded (:class:`TargetPrefixDecoder`).

    With --position-shift S > 0 (segment-shifted positions, Lupo et al., 2022) a token of
    segment s (0 = source) gets the sinusoidal position of p + s·S instead of p."""

    def __init__(self, cfg, args, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.max_context_sentences = args.max_context_sentences
        self.position_shift = args.position_shift or 0
        if self.position_shift and not isinstance(self.embed_positions, SinusoidalPositionalEmbedding):
            raise ValueError("--position-shift needs fairseq's sinusoidal positions: drop --encoder-learned-pos and "
                             "--no-token-positional-embeddings, or use --position-shift 0")
        self.segment_embed = nn.Embedding(self.max_context_sentences + 1, cfg.encoder.embed_dim)
        nn.init.normal_(self.segment_embed.weight, mean=0, std=cfg.encoder.embed_dim ** -0.5)
        self.target_context_size = 0

    def forward_with_context(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor],
        context: ContextInputs,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
    ) -> Dict[str, List[Tensor]]:
        """With --target-context-size > 0 the batch must give the previous target sentences
        (``target_context_index``; all -1 = none)."""
        out = super().forward_with_context(src_tokens, src_lengths, context, return_all_hiddens, token_embeddings)
        if self.target_context_size > 0:
            check_target_slots(context.target_context_index, self.target_context_size)
            out["target_prefix"] = [self.target_prefix(src_tokens, context.target_context_tokens,
                                                       context.target_context_index)]
        return out

    def target_prefix(self, src_tokens: Tensor, tokens: Optional[Tensor], index: Optional[Tensor]) -> Tensor:
        """(B, P) previous target sentences, oldest first, right-padded; (B, 1) padding when
        no example has any."""
        tokens, index = context_or_placeholder(src_tokens, tokens, index, self.dictionary.eos())
        slot_tokens, slot_padding = gather_slots(tokens, tokens.eq(self.padding_idx), index.flip(1))
        batch = index.size(0)
        prefix, padding = compact(slot_tokens.reshape(batch, -1), slot_padding.reshape(batch, -1))
        return prefix.masked_fill(padding, self.padding_idx)

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor) -> Dict[str, List[Tensor]]:
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        if "target_prefix" in encoder_out:
            reordered["target_prefix"] = [encoder_out["target_prefix"][0].index_select(0, new_order)]
        return reordered

    def encode(self, src_tokens, context_tokens, context_index, token_embeddings):
        batch, slots = context_index.shape
        filled_slots = context_index.ge(0).any(dim=0).nonzero()
        used = int(filled_slots.max()) + 1 if filled_slots.numel() else 0
        if used > self.max_context_sentences:
            raise ValueError(f"ctx_concat: a batch has {used} context sentences per example but the model has "
                             f"--max-context-sentences {self.max_context_sentences}; lower --context-size")
        slot_tokens, slot_padding = gather_slots(context_tokens, context_tokens.eq(self.padding_idx), context_index)
        segments = torch.arange(1, slots + 1, device=src_tokens.device).view(1, slots, 1).expand_as(slot_padding)
        tokens = torch.cat([src_tokens, slot_tokens.reshape(batch, -1)], dim=1)
        padding = torch.cat([src_tokens.eq(self.padding_idx), slot_padding.reshape(batch, -1)], dim=1)
        segments = torch.cat([torch.zeros_like(src_tokens), segments.reshape(batch, -1)], dim=1)
        packed, padding = compact(torch.stack([tokens, segments], dim=-1), padding)
        tokens = packed[..., 0].masked_fill(padding, self.padding_idx)
        segments = packed[..., 1].masked_fill(padding, 0)
        embedded = self.embed_tokens(tokens) + self.segment_embed(segments)
        if self.position_shift:
            embedded = embedded + self.position_shift_term(tokens, segments) / self.embed_scale
        x, padding, embedding = self.embed(tokens, embedded)
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=padding)
        return x, padding, embedding, tokens


    def position_shift_term(self, tokens: Tensor, segments: Tensor) -> Tensor:
        """(B, T, C) what turns fairseq's sinusoidal position p of each token into p + s·S
        (added before the embedding scale, which fairseq applies to the token embedding only)."""
        positions = make_positions(tokens, self.padding_idx)
        shifted = positions + segments * self.position_shift
        table = SinusoidalPositionalEmbedding.get_embedding(int(shifted.max()) + 1, self.embed_tokens.embedding_dim,
                                                            self.padding_idx).to(self.embed_tokens.weight)
        return table[shifted] - table[positions]


@register_model("context_concat_transformer", dataclass=with_transformer_options(ConcatContextConfig))
class ConcatContextTransformer(ContextTransformerModel):
    """TwC baseline: Transformer over the concatenation of source and context sentences; with
    --target-context-size > 0 the previous target sentences are a decoder prefix."""

    encoder_class = ConcatContextEncoder
    options = ConcatContextConfig
    reads_target_context = True

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        return TargetPrefixDecoder(TransformerConfig.from_namespace(args), tgt_dict, embed_tokens,
                                   no_encoder_attn=args.no_cross_attention)

    def read_target_context(self, size: int) -> None:
        self.encoder.target_context_size = size
        self.decoder.read_target_context()


@register_model_architecture("context_concat_transformer", "ctx_concat")
def ctx_concat_architecture(args):
    """TwC with Transformer-base sizes (512, 6+6 layers, 8 heads, dropout 0.1)."""
    if getattr(args, "position_shift", None) is None:
        args.position_shift = 0
    base_architecture(args)


@register_model_architecture("context_concat_transformer", "focused_concat")
def focused_concat_architecture(args):
    """Focused concatenation (Lupo et al., 2022, WMT): ctx_concat with segment-shifted positions
    (shift 21), trained with the previous target sentences as decoder prefix
    (--target-context-size) and the discounted context loss (--criterion
    context_discounted_cross_entropy, --context-discount 0.01); Transformer-base sizes."""
    if getattr(args, "position_shift", None) is None:
        args.position_shift = 21
    base_architecture(args)
