"""Architectures ``caching_tokens`` and ``caching_sentence``: the encoder states of the context
sentences, cached, attended by an extra cross-attention in every decoder layer."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, base_architecture
from fairseq.modules import PositionalEmbedding
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.models.context_transformer import ContextBatchNeeds, ContextTransformerModel
from fairseq_ctx.context.modules.cached_context_decoder import CachedContextDecoder
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase
from fairseq_ctx.context.modules.context_gather import compact, gather_slots
from fairseq_ctx.context.modules.empty_context import context_or_placeholder
from fairseq_ctx.context.modules.sentence_vector_cache import ClearedWithTheWeights, SentenceVectorCache
from fairseq_ctx.context.modules.sequence_shortening import METHODS, POOLINGS, SequenceShortening
from fairseq_ctx.context.sentence_init import SentenceInitConfig
from fairseq_ctx.core.model_options import with_transformer_options


@dataclass
class CachingConfig(SentenceInitConfig):
    """Options of the caching models (Mąka et al., 2024) beyond fairseq's Transformer; the
    defaults are those of the paper's training recipe."""
    cache_sentence: bool = field(
        default=False,
        metadata={"help": "cache one vector per context sentence, the mean of its token states (caching "
                  "sentence), instead of its token states (caching tokens); set by the architecture"},
    )
    context_encoder_gradient: bool = field(
        default=False,
        metadata={"help": "back-propagate through the cached context states into the encoder (the paper "
                  "caches them without gradient, as states computed when the previous sentence was translated)"},
    )
    sinusoidal_sentence_positions: bool = field(
        default=False,
        metadata={"help": "sinusoidal instead of learned sentence-position embeddings added to the cache "
                  "(the paper's recipe learns them)"},
    )
    max_context_sentences: int = field(
        default=10,
        metadata={"help": "number of sentence-position embeddings (slot i of the context, nearest first, has "
                  "position i + 1); must be >= --context-size"},
    )
    shortening: Optional[str] = field(
        default=None,
        metadata={"help": "sequence shortening of each cached sentence: " + ", ".join(METHODS) + " (see "
                  "fairseq_ctx.context.modules.sequence_shortening); set by the shortening_* architectures"},
    )
    shortening_size: int = field(
        default=10,
        metadata={"help": "groups of grouping/selecting, window of the poolings (the public code's default: 10)"},
    )
    shortening_sparsemax: bool = field(
        default=False,
        metadata={"help": "grouping/selecting weights by sparsemax instead of softmax (the paper's sparse variant)"},
    )


class CachingEncoder(ClearedWithTheWeights, ContextEncoderBase):
    """Caching multi-encoder of Mąka et al. (2024) ("Caching Tokens" / "Caching Sentence"). The
    source is encoded exactly as by the sentence-level encoder and never sees its context. Each
    distinct context sentence is encoded alone by the same encoder (all layers, final LayerNorm
    included), so its cache equals the states it had when it was itself translated; by default
    without gradient (the cache of the previous step). Caching sentence keeps the mean of its
    non-pad token states instead (one vector per sentence). The cache of context slot i
    (nearest first) gets sentence-position embedding i + 1, and the slots of an example are
    concatenated into ``encoder_out["context_out"]`` (S, B, C) with ``["context_padding_mask"]``
    (B, S), which :class:`CachedContextDecoder` attends in every layer.

    Differences from the public code: it keeps the positions of a fixed context size with the
    farthest sentence first, and a missing context sentence is an encoded ``[eos]``; here
    empty slots are masked and a sentence without any context skips the context attention
    (sentence-level output); its sentence mean divides by the padded length, here by the
    number of tokens (padding-invariant).

    At inference the cache is what the paper's name says: each context sentence's states are
    kept (keyed by its tokens, :class:`SentenceVectorCache`) and read back while it stays in
    the context window, so a document's sentences are encoded once as context; off with the
    task's ``--no-context-cache`` (every slot encoded again, the reference computation)."""

    def __init__(self, cfg, args, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.cache_sentence = args.cache_sentence
        self.context_encoder_gradient = args.context_encoder_gradient
        self.max_context_sentences = args.max_context_sentences
        self.sentence_positions = PositionalEmbedding(args.max_context_sentences, cfg.encoder.embed_dim, padding_idx=0,
                                                      learned=not args.sinusoidal_sentence_positions)
        self.context_cache: Optional[SentenceVectorCache] = SentenceVectorCache()
        self.shortening: Optional[SequenceShortening] = None
        if args.shortening:
            if args.cache_sentence:
                raise ValueError("caching_sentence caches one vector per sentence already: --shortening is for the "
                                 "token caches (caching_tokens, shortening_*)")
            self.shortening = SequenceShortening(args.shortening, args.shortening_size, cfg.encoder.embed_dim,
                                                 cfg.encoder.attention_heads, cfg.attention_dropout,
                                                 sparsemax=args.shortening_sparsemax)

    def set_context_cache(self, enabled: bool) -> None:
        self.context_cache = SentenceVectorCache() if enabled else None

    def clear_context_caches(self) -> None:
        if self.context_cache is not None:
            self.context_cache.clear()

    def run_layers(self, x: Tensor, padding: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=padding)
        return x

    def encode(self, src_tokens, context_tokens, context_index, token_embeddings):
        x, padding, embedding = self.embed(src_tokens, token_embeddings)
        return self.run_layers(x, padding), padding, embedding, src_tokens

    def forward_with_context(self, src_tokens: Tensor, src_lengths, context: ContextInputs, return_all_hiddens: bool = False,
                             token_embeddings=None) -> Dict[str, List[Tensor]]:
        out = super().forward_with_context(src_tokens, src_lengths, context, return_all_hiddens, token_embeddings)
        tokens, index = context_or_placeholder(src_tokens, context.context_tokens, context.context_index,
                                               self.dictionary.eos())
        cache, padding = self.cache(tokens, index)
        out["context_out"], out["context_padding_mask"] = [cache], [padding]
        return out

    def sentence_states(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        """(U, Lc) context sentences → their states (U, L, C), each sentence encoded alone, and
        padding (U, L); caching sentence: their means (U, 1, C) and (U, 1). At inference with the
        context cache on, the sentences seen before are read from it and only the others encoded."""
        if self.context_cache is None or self.training or torch.is_grad_enabled():
            return self.encode_sentences(tokens)
        keys = SentenceVectorCache.keys_of(tokens, self.padding_idx)
        found = self.context_cache.lookup(keys, like=self.embed_tokens.weight)
        missing = [row for row in range(len(keys)) if row not in found]
        if missing:
            states, padding = self.encode_sentences(tokens[missing])
            for row, sentence_states, sentence_padding in zip(missing, states, padding):
                found[row] = sentence_states[~sentence_padding]
                self.context_cache.store([keys[row]], found[row].unsqueeze(0))
        rows = [found[row] for row in range(len(keys))]
        lengths = torch.tensor([len(r) for r in rows], device=tokens.device)
        padding = torch.arange(int(lengths.max()), device=tokens.device).unsqueeze(0) >= lengths.unsqueeze(1)
        return pad_sequence(rows, batch_first=True), padding

    def encode_sentences(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        """:meth:`sentence_states` computed: every sentence encoded (gradient only with
        ``--context-encoder-gradient``)."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.context_encoder_gradient):
            x, padding, _ = self.embed(tokens)
            x = self.run_layers(x, padding)
            if self.layer_norm is not None:
                x = self.layer_norm(x)
        x = x.transpose(0, 1)
        if self.shortening is not None:  # trained even when the encoder states are cached without gradient
            return self.shortening(x, padding)
        if not self.cache_sentence:
            return x, padding
        keep = (~padding).unsqueeze(-1).type_as(x)
        mean = (x * keep).sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True).clamp(min=1)
        return mean, padding.all(dim=1, keepdim=True)

    def cache(self, tokens: Tensor, index: Tensor) -> Tuple[Tensor, Tensor]:
        """The cache of each example: its context slots' states plus their sentence positions,
        concatenated and right-padded, (S, B, C) and padding (B, S)."""
        batch, slots = index.shape
        filled = index.ge(0).any(dim=0).nonzero()
        used = int(filled.max()) + 1 if filled.numel() else 1
        if used > self.max_context_sentences:
            raise ValueError(f"caching: a batch has {used} context sentences per example but the model has "
                             f"--max-context-sentences {self.max_context_sentences}; lower --context-size")
        index = index[:, :used]
        states, padding = self.sentence_states(tokens)
        values, slot_padding = gather_slots(states, padding, index)
        positions = self.sentence_positions(index.new_ones(1, used))
        values = values + positions.view(1, used, 1, -1).to(values)
        values, padding = compact(values.reshape(batch, -1, values.size(-1)), slot_padding.reshape(batch, -1))
        return values.transpose(0, 1), padding

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor) -> Dict[str, List[Tensor]]:
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        reordered["context_out"] = [encoder_out["context_out"][0].index_select(1, new_order)]
        reordered["context_padding_mask"] = [encoder_out["context_padding_mask"][0].index_select(0, new_order)]
        return reordered


@register_model("caching_transformer", dataclass=with_transformer_options(CachingConfig))
class CachingTransformer(ContextTransformerModel):
    """Caching models of Mąka et al. (2024): sentence-level encoder, cached context states,
    context attention in every decoder layer (:class:`CachedContextDecoder`)."""

    encoder_class = CachingEncoder
    options = CachingConfig

    def configure_context(self, cache: bool, document_window: int) -> ContextBatchNeeds:
        """The context cache on or off (the task's ``--no-context-cache``)."""
        self.encoder.set_context_cache(cache)
        return ContextBatchNeeds()

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        return CachedContextDecoder(TransformerConfig.from_namespace(args), tgt_dict, embed_tokens,
                                    no_encoder_attn=args.no_cross_attention)


@register_model_architecture("caching_transformer", "caching_tokens")
def caching_tokens_architecture(args):
    """Caching Tokens (Mąka et al., 2024): every token state of the context sentences is cached;
    Transformer-base sizes (512, 6+6 layers, 8 heads, dropout 0.1)."""
    args.cache_sentence = False
    base_architecture(args)


@register_model_architecture("caching_transformer", "caching_sentence")
def caching_sentence_architecture(args):
    """Caching Sentence (Mąka et al., 2024): one mean vector per context sentence is cached;
    Transformer-base sizes."""
    args.cache_sentence = True
    base_architecture(args)


def shortening_architecture(args, method: str) -> None:
    args.cache_sentence = False
    args.shortening = method
    base_architecture(args)


@register_model_architecture("caching_transformer", "shortening_grouping")
def shortening_grouping_architecture(args):
    """Caching tokens with Latent Grouping (Mąka et al., 2024): each cached sentence shortened to
    --shortening-size (10) learned groups of its tokens; Transformer-base sizes."""
    shortening_architecture(args, "grouping")


@register_model_architecture("caching_transformer", "shortening_selecting")
def shortening_selecting_architecture(args):
    """Caching tokens with Latent Selecting (Mąka et al., 2024): --shortening-size (10) learned
    selections over each cached sentence's tokens; Transformer-base sizes."""
    shortening_architecture(args, "selecting")


@register_model_architecture("caching_transformer", "shortening_pooling")
def shortening_pooling_architecture(args):
    """Caching tokens with mean pooling (Mąka et al., 2024): windows of --shortening-size tokens
    averaged (--shortening max_pooling: max-pooled; linear_pooling: concatenated and projected);
    Transformer-base sizes."""
    if getattr(args, "shortening", None) not in POOLINGS:
        args.shortening = "mean_pooling"
    args.cache_sentence = False
    base_architecture(args)
