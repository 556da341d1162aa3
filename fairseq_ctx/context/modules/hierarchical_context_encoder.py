"""The hierarchical (memory) context encoder of HCE/HMCE."""
import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.modules import (
    FairseqDropout,
    LayerNorm,
    MultiheadAttention,
    SinusoidalPositionalEmbedding,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor, nn

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.modules.attentive_pooling import AttentivePooling
from fairseq_ctx.context.modules.context_encoder_base import ContextEncoderBase, encoder_sized_decoder_config
from fairseq_ctx.context.modules.document_vector import DocumentVector
from fairseq_ctx.context.modules.empty_context import attendable, context_or_placeholder, placeholder_sentence, without_context
from fairseq_ctx.context.modules.gated_sum import GatedSum
from fairseq_ctx.context.modules.sentence_vector_cache import ClearedWithTheWeights, SentenceVectorCache
from fairseq_ctx.context.modules.target_context import TargetContext
from fairseq_ctx.core.length_chunks import trim_padding

SourceRowPooling = Callable[[Tensor], Tensor]


def first_rows(out: Dict[str, List[Optional[Tensor]]], count: int) -> Dict[str, List[Optional[Tensor]]]:
    """An encoder output with only its first ``count`` batch rows (views: no copy)."""
    batch_second = ("encoder_out", "encoder_states", "fc_results", "lower_level")
    return {key: [None if value is None else value.narrow(1 if key in batch_second else 0, 0, count)
                  for value in values]
            for key, values in out.items()}


def read_rows(context_tokens: Tensor, context_index: Tensor) -> Tensor:
    """(U,) True for the rows of ``context_tokens`` that some slot of ``context_index`` reads
    (an empty slot, -1, marks an extra first entry that is dropped: no host sync)."""
    read = torch.zeros(context_tokens.size(0) + 1, dtype=torch.bool, device=context_tokens.device)
    read[context_index.flatten() + 1] = True
    return read[1:]


@dataclasses.dataclass(frozen=True)
class ContextRowCounts:
    """What a training step needs to know on the host about its context rows, read once per step
    (:meth:`HierarchicalContextEncoder.plan_context_rows`), so that its code decides on them without
    reading device values again: how many rows its slots read, and the rows encoded on their own
    (neither a source of the batch nor encoded with the sources: longer than every source) with the
    length of the longest."""

    read: int
    apart_rows: Tensor
    apart_width: int


class HierarchicalContextEncoder(ClearedWithTheWeights, ContextEncoderBase):
    """Source encoder + hierarchical context encoder (Yun 2022, eq. 3.14–3.17, Fig. 3.1/3.2).

    1. Lower level: each context sentence c_i → e_i = StackedTransformerEncoder(c_i)
       (shares the source encoder's layers unless ``separate_context_encoder``), eq. 3.14.
    2. Self-attentive weighted sum s_i = Σ_j α_j e_ij (eq. 3.15–3.16), plus a sinusoidal
       embedding of the slot index i (distance to the current sentence).
    3. Upper level over s = [s_0..s_{N-1}]: a Transformer encoder layer (HCE, eq. 3.17), or
       with ``memory_attention`` (HMCE, Fig. 3.2) self-attention, then memory attention whose
       query is the context tensor and whose keys/values are the source embedding, then FFN.
    4. h_ctx = MultiHead(h_src, t); output = GatedSum(h_src, h_ctx) (eq. 3.6–3.8).

    With target-side context (--target-context-size M > 0, :class:`TargetContext`) the previous M
    target sentences are M more slots, encoded by the same lower level over the target
    embeddings; steps 3–4 run over [source slots; target slots].

    Empty context slots are masked everywhere. A sentence without any context (document
    start) gets exactly the sentence-level encoding h_src; the context path still runs on it
    (on zero vectors) so every parameter is part of every step's graph.

    Context sentences arrive as ``[<boc>] + sentence`` (the task's format, which the
    concatenation baselines need); HCE/HMCE encode each one on its own, so the lower level
    drops the ``<boc>`` and encodes it exactly like a source sentence (its role is carried by
    the slot-distance embedding). With shared layers e_i is then the source encoder's own
    state (after ``--context-encoder-layers`` layers) of that sentence, which gives the
    context cache (on unless ``set_context_cache(False)``, the task's ``--no-context-cache``):

    - training and inference: a context sentence that is also a source of the batch
      (``context_source_row`` ≥ 0, the usual case with document-window batching) is pooled
      from the source encoder's states instead of being encoded a second time;
    - with autograd (training): the other context sentences, when no longer than the batch's
      sources, are encoded as more rows of the source pass (:meth:`forward_with_context_rows`),
      so the lower level runs once per batch;
    - inference (eval mode, no autograd): pooled vectors s_i are kept in a
      :class:`SentenceVectorCache`, so each sentence of a document is encoded once.

    Both compute the same numbers as encoding every context sentence separately (up to
    float rounding from different padding); ``--no-context-cache`` does the latter, with no
    reuse at all: every (example, slot) pair encodes its sentence on its own, as eq. 3.14 reads.
    """

    def __init__(self, cfg: TransformerConfig, args, dictionary, embed_tokens):
        """``args``: the model's options (:class:`~fairseq_ctx.context.models.hmce.HierarchicalContextConfig`)."""
        super().__init__(cfg, dictionary, embed_tokens)
        embed_dim = cfg.encoder.embed_dim
        heads = cfg.encoder.attention_heads
        self.memory_attention = args.memory_attention
        num_lower = args.context_encoder_layers
        num_lower = cfg.encoder.layers if num_lower is None else num_lower
        if args.separate_context_encoder:
            self.context_layers: Optional[nn.ModuleList] = nn.ModuleList(
                [self.build_encoder_layer(cfg) for _ in range(num_lower)]
            )
            self.context_layer_norm = LayerNorm(embed_dim, export=cfg.export) if cfg.encoder.normalize_before else None
        else:
            if num_lower > cfg.encoder.layers:
                raise ValueError(
                    f"--context-encoder-layers {num_lower} exceeds --encoder-layers {cfg.encoder.layers}; "
                    f"use --separate-context-encoder for a deeper context encoder"
                )
            self.context_layers = None
        self.num_context_layers = num_lower
        self.pooling = AttentivePooling(embed_dim, heads, dropout=cfg.attention_dropout)
        if self.memory_attention:
            self.upper = TransformerDecoderLayerBase(encoder_sized_decoder_config(cfg))
        else:
            self.upper = TransformerEncoderLayerBase(cfg)
        self.context_attn = MultiheadAttention(
            embed_dim, heads, dropout=cfg.attention_dropout, encoder_decoder_attention=True
        )
        self.context_dropout = FairseqDropout(cfg.dropout, module_name=self.__class__.__name__)
        self.gated_sum = GatedSum(embed_dim)
        self.document_vector: Optional[DocumentVector] = (
            DocumentVector(embed_dim, args.document_vector_span, self.padding_idx) if args.document_vector else None
        )
        self.register_buffer("slot_positions", SinusoidalPositionalEmbedding.get_embedding(16, embed_dim), persistent=False)
        self.context_cache: Optional[SentenceVectorCache] = SentenceVectorCache()
        self.target_context: Optional[TargetContext] = None

    def read_target_context(self, size: int, embed_tokens: nn.Embedding) -> None:
        """Read the previous ``size`` target sentences too, over ``embed_tokens`` (the decoder's
        embedding), as slots next to the source ones (:class:`TargetContext`)."""
        self.target_context = TargetContext(size, self.embed_tokens.embedding_dim, embed_tokens)
        self.target_context.set_cache(self.context_cache is not None)

    def set_context_cache(self, enabled: bool) -> None:
        """Reuse in-batch source encodings and cache sentence vectors (default), or encode
        the sentence of every context slot separately (the reference computation)."""
        self.context_cache = SentenceVectorCache() if enabled else None
        if self.target_context is not None:
            self.target_context.set_cache(enabled)

    @property
    def reuses_source_encodings(self) -> bool:
        return self.context_cache is not None and self.context_layers is None

    def clear_context_caches(self) -> None:
        if self.context_cache is not None:
            self.context_cache.clear()
        if self.target_context is not None:
            self.target_context.clear_cache()

    def slot_position_table(self, num_slots: int) -> Tensor:
        """Sinusoidal embeddings of slot distances 0..num_slots-1, grown on demand."""
        if num_slots > self.slot_positions.size(0):
            self.slot_positions = SinusoidalPositionalEmbedding.get_embedding(num_slots, self.slot_positions.size(1)).to(
                self.slot_positions
            )
        return self.slot_positions[:num_slots]

    def lower_level_layers(self) -> Tuple[List[nn.Module], Optional[nn.Module]]:
        if self.context_layers is not None:
            return list(self.context_layers), self.context_layer_norm
        return list(self.layers)[: self.num_context_layers], self.layer_norm

    def lower_level(self, tokens: Tensor, embed: Optional[nn.Embedding] = None,
                    width: Optional[int] = None) -> Tuple[Tensor, Tensor]:
        """(U, Lc) sentences (no <boc>) → the lower level's states e (Lc', U, C) (eq. 3.14) and
        their padding mask (U, Lc'), the sentences cut to the longest one (``width`` tokens when
        known on the host); ``embed``: the token embedding to read them with (default: the source
        embedding)."""
        if width is None:
            width = max(int(tokens.ne(self.padding_idx).sum(dim=1).max()), 1)
        tokens = tokens[:, :width]
        padding_mask = tokens.eq(self.padding_idx)
        x, _ = self.forward_embedding(tokens, None if embed is None else embed(tokens))
        x = (x * (1 - padding_mask.unsqueeze(-1).type_as(x))).transpose(0, 1)
        layers, final_norm = self.lower_level_layers()
        for layer in layers:
            x = layer(x, encoder_padding_mask=padding_mask)
        if final_norm is not None:
            x = final_norm(x)
        return x, padding_mask

    def encode_context_sentences(self, tokens: Tensor, embed: Optional[nn.Embedding] = None,
                                 width: Optional[int] = None) -> Tensor:
        """(U, Lc) sentences (no <boc>) → (U, C) sentence vectors s_i (eq. 3.14–3.16)."""
        return self.pooling(*self.lower_level(tokens, embed, width))

    def context_word_weights(self, tokens: Tensor, embed: Optional[nn.Embedding] = None) -> Tensor:
        """(U, Lc) sentences (no <boc>) → the word weights α (U, Lc') of their weighted sum s_i
        (eq. 3.15–3.16), float32, zero at padding: where the word level of the context encoder looks."""
        return self.pooling.weights(*self.lower_level(tokens, embed))

    def source_lower_level(self, encoder_out: Dict[str, List[Tensor]]) -> Tensor:
        """The shared lower level's states (T, B, C) of the batch's own source sentences."""
        if self.num_context_layers == len(self.layers):
            return encoder_out["encoder_out"][0]
        x = encoder_out["encoder_states"][self.num_context_layers]
        return self.layer_norm(x) if self.layer_norm is not None else x

    def context_vectors(
        self,
        context_tokens: Tensor,
        needed: Tensor,
        context_source_row: Optional[Tensor],
        pool_source_rows: Optional[SourceRowPooling],
        cache: Optional[SentenceVectorCache],
        embed: Optional[nn.Embedding] = None,
        counts: Optional[ContextRowCounts] = None,
    ) -> Tensor:
        """(U, C) vector s_u of every ``needed`` context row (zeros elsewhere): pooled from the
        batch's source states (``pool_source_rows``), read from ``cache``, or encoded (with
        ``embed``, see :meth:`encode_context_sentences`). The reused rows are selected with
        ``torch.where`` (no host sync; every row's source pooled, the others' discarded);
        ``counts``: the rows left to encode, when known on the host (training)."""
        sentences = context_tokens[:, 1:]
        pending = needed.clone()
        result = self.embed_tokens.weight.new_zeros(sentences.size(0), self.embed_tokens.embedding_dim)
        if pool_source_rows is not None and context_source_row is not None:
            reused = context_source_row.ge(0) & needed
            result = torch.where(reused.unsqueeze(-1), pool_source_rows(context_source_row.clamp(min=0)).to(result),
                                 result)
            pending &= ~reused
        use_cache = cache is not None and not self.training and not torch.is_grad_enabled()
        keys = SentenceVectorCache.keys_of(sentences[needed], self.padding_idx) if use_cache else []
        if use_cache:
            key_of = dict(zip(needed.nonzero().squeeze(1).tolist(), keys))
            pending_positions = pending.nonzero().squeeze(1).tolist()
            found = cache.lookup([key_of[p] for p in pending_positions], like=self.embed_tokens.weight)
            if found:
                hits = [pending_positions[i] for i in found]
                result = result.index_copy(0, torch.tensor(hits, dtype=torch.long, device=sentences.device),
                                           torch.stack(list(found.values())).to(result))
                pending[hits] = False
        if counts is not None:
            if counts.apart_rows.numel():
                encoded = self.encode_context_sentences(sentences[counts.apart_rows], embed, counts.apart_width)
                result = result.index_copy(0, counts.apart_rows, encoded.to(result))
        elif pending.any():
            rows = pending.nonzero().squeeze(1)
            result = result.index_copy(0, rows, self.encode_context_sentences(sentences[rows], embed).to(result))
        if use_cache:
            cache.store(keys, result[needed])
        return result

    def sentence_slots(
        self,
        src_tokens: Tensor,
        context_tokens: Tensor,
        context_index: Tensor,
        cache: Optional[SentenceVectorCache],
        context_source_row: Optional[Tensor] = None,
        pool_source_rows: Optional[SourceRowPooling] = None,
        embed: Optional[nn.Embedding] = None,
        counts: Optional[ContextRowCounts] = None,
    ) -> Tuple[Tensor, Tensor]:
        """Slot vectors (B, N, C) of ``[<boc>] + sentence`` rows (U, Lc) gathered by
        ``context_index`` (B, N), each plus the embedding of its slot distance, and the slot mask
        (B, N), True for empty slots; ``cache`` as in :meth:`context_vectors`, unless the
        reference computation (``--no-context-cache``) encodes every slot on its own; ``counts``:
        the step's context rows counted on the host (:meth:`plan_context_rows`)."""
        needed = read_rows(context_tokens, context_index)
        empty = context_index.lt(0)
        if not needed.any() if counts is None else counts.read == 0:
            vectors = self.encode_context_sentences(placeholder_sentence(src_tokens, self.dictionary.eos()), embed)
            slots = vectors[context_index.clamp(min=0)] * (~empty).unsqueeze(-1).type_as(vectors)
        elif self.context_cache is None:
            per_slot = self.encode_context_sentences(context_tokens[context_index[~empty], 1:], embed)
            slots = per_slot.new_zeros(*context_index.shape, per_slot.size(-1))
            slots[~empty] = per_slot
        else:
            vectors = self.context_vectors(context_tokens, needed, context_source_row, pool_source_rows, cache, embed,
                                           counts)
            slots = vectors[context_index.clamp(min=0)] * (~empty).unsqueeze(-1).type_as(vectors)
        return slots + self.slot_position_table(slots.size(1)).to(slots).unsqueeze(0), empty

    def context_slots(
        self, src_tokens: Tensor, context: ContextInputs, pool_source_rows: Optional[SourceRowPooling],
        counts: Optional[ContextRowCounts] = None,
    ) -> Tuple[Tensor, Tensor]:
        """Returns slot vectors (N, B, C) (N+1 with the document vector) and the slot mask
        (B, N), True for empty slots."""
        context_tokens, context_index = context_or_placeholder(src_tokens, context.context_tokens, context.context_index,
                                                               self.dictionary.eos())
        slots, empty = self.sentence_slots(src_tokens, context_tokens, context_index, self.context_cache,
                                           context.context_source_row, pool_source_rows, counts=counts)
        if self.document_vector is not None:
            if context.document_index is None:
                raise ValueError(
                    "this model has --document-vector but the batch has no 'document_index': "
                    "use it with the context_translation task (which supplies it) and --context-size > 0"
                )
            document, no_document = self.document_vector(self.embed_tokens, context_tokens[:, 1:], context.document_index)
            slots = torch.cat([slots, document.unsqueeze(1).to(slots)], dim=1)
            empty = torch.cat([empty, no_document.unsqueeze(1)], dim=1)
        return slots.transpose(0, 1), empty

    def target_context_slots(self, src_tokens: Tensor, context: ContextInputs) -> Tuple[Tensor, Tensor]:
        """The target-side slots (M, B, C) and their mask (B, M) (:class:`TargetContext`);
        ``context.target_context_index`` is required (:meth:`TargetContext.check_slots`)."""
        self.target_context.check_slots(context.target_context_index)
        tokens, index = context_or_placeholder(src_tokens, context.target_context_tokens, context.target_context_index,
                                               self.dictionary.eos())
        slots, empty = self.sentence_slots(src_tokens, tokens, index, self.target_context.cache,
                                           embed=self.target_context.embed_tokens)
        return self.target_context.mark(slots).transpose(0, 1), empty

    def all_context_slots(
        self, src_tokens: Tensor, context: ContextInputs, pool_source_rows: Optional[SourceRowPooling],
        counts: Optional[ContextRowCounts] = None,
    ) -> Tuple[Tensor, Tensor]:
        """The source context slots (N, B, C), followed by the target ones when the model reads
        target context, and their mask (B, N(+M)); ``counts``: the source context rows counted
        on the host."""
        slots, empty = self.context_slots(src_tokens, context, pool_source_rows, counts)
        if self.target_context is None:
            return slots, empty
        target_slots, target_empty = self.target_context_slots(src_tokens, context)
        return torch.cat([slots, target_slots], dim=0), torch.cat([empty, target_empty], dim=1)

    def forward_with_context(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor],
        context: ContextInputs,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
    ) -> Dict[str, List[Tensor]]:
        reuse = self.reuses_source_encodings and context.context_source_row is not None
        plan = (self.plan_context_rows(src_tokens, context)
                if reuse and token_embeddings is None and (self.training or torch.is_grad_enabled()) else None)
        rows, counts = plan if plan is not None else (None, None)
        if rows is not None and rows.numel():
            return self.forward_with_context_rows(src_tokens, src_lengths, context, rows, return_all_hiddens, counts)
        out = self.encode_sources(src_tokens, src_lengths, return_all_hiddens, reuse, token_embeddings)
        pool = self.source_row_pooling([out], [torch.arange(src_tokens.size(0), device=src_tokens.device)]) if reuse else None
        slots, empty = self.all_context_slots(src_tokens, context, pool, counts)
        return self.fuse_context(out, slots, empty)

    def plan_context_rows(self, src_tokens: Tensor, context: ContextInputs) -> Optional[Tuple[Tensor, ContextRowCounts]]:
        """The context rows (of ``context.context_tokens``, ascending) to encode as more rows of
        the source pass: those that some slot reads, that no source of the batch holds and that
        are no longer than the batch's sources (so encoding them there widens nothing); and the
        step's :class:`ContextRowCounts`. Every count comes from one read of device values (one
        host sync per step; the rows are cut from a sort, not found by ``nonzero``). None when the
        batch has no context entries."""
        tokens, index = context.context_tokens, context.context_index
        if tokens is None or index is None:
            return None
        lengths = tokens[:, 1:].ne(self.padding_idx).sum(dim=1)
        fits = lengths.le(src_tokens.size(1))
        read = read_rows(tokens, index)
        new = read & context.context_source_row.lt(0)
        # 0: encoded with the sources, 1: encoded apart, 2: a source of the batch, 3: not read
        kind = torch.where(new & fits, 0, torch.where(new, 1, torch.where(read, 2, 3)))
        longest_apart = torch.cat([torch.where(kind.eq(1), lengths, 0), lengths.new_ones(1)]).max().view(1)  # >= 1
        with_sources, apart, sources, _, width = torch.cat([torch.bincount(kind, minlength=4), longest_apart]).tolist()
        order = torch.argsort(kind, stable=True)
        return order[:with_sources], ContextRowCounts(read=with_sources + apart + sources,
                                                      apart_rows=order[with_sources:with_sources + apart], apart_width=width)

    def forward_with_context_rows(
        self, src_tokens: Tensor, src_lengths: Optional[Tensor], context: ContextInputs, rows: Tensor,
        return_all_hiddens: bool, counts: Optional[ContextRowCounts] = None,
    ) -> Dict[str, List[Tensor]]:
        """:meth:`forward_with_context` with the context sentences ``rows`` encoded in the same pass
        as the sources, as more rows of the batch (one pass instead of two: on a GPU, half the
        kernel launches of the lower level), then pooled from it like the sources that are also
        context. Every row is encoded on its own (attention is masked per row), so the numbers
        are those of encoding the rows apart, up to float rounding."""
        batch, width = src_tokens.size()
        sentences = context.context_tokens[rows, 1:]
        sentences = sentences[:, :width] if sentences.size(1) >= width else torch.nn.functional.pad(
            sentences, (0, width - sentences.size(1)), value=self.padding_idx)
        tokens = torch.cat([src_tokens, sentences])
        lengths = None if src_lengths is None else torch.cat(
            [src_lengths, sentences.ne(self.padding_idx).sum(dim=1).to(src_lengths)])
        both = self.encode_sources(tokens, lengths, return_all_hiddens, reuse=True)
        source_row = context.context_source_row.clone()
        source_row[rows] = torch.arange(batch, batch + rows.numel(), device=rows.device)
        pool = self.source_row_pooling([both], [torch.arange(tokens.size(0), device=tokens.device)])
        with_rows = dataclasses.replace(context, context_source_row=source_row)
        slots, empty = self.all_context_slots(src_tokens, with_rows, pool, counts)
        return self.fuse_context(first_rows(both, batch), slots, empty)

    def forward_chunks(
        self, src_tokens: Tensor, src_lengths: Tensor, chunks: List[Tensor], context: ContextInputs,
        return_all_hiddens: bool = False,
    ) -> List[Dict[str, List[Tensor]]]:
        """The encoder outputs of the batch rows ``chunks`` (a partition of the batch), each
        chunk cut to its own longest source: the same numbers as :meth:`forward` on the whole
        batch, with less padding (``encoder_states`` too with ``return_all_hiddens``). Context
        sentences that are sources of the batch are pooled from whichever chunk encoded them."""
        reuse = self.reuses_source_encodings and context.context_source_row is not None
        outs = [
            self.encode_sources(trim_padding(src_tokens.index_select(0, rows), self.padding_idx)[0],
                                src_lengths.index_select(0, rows), return_all_hiddens, reuse)
            for rows in chunks
        ]
        pool = self.source_row_pooling(outs, chunks) if reuse else None
        slots, empty = self.all_context_slots(src_tokens, context, pool)
        return [self.fuse_context(out, slots.index_select(1, rows), empty.index_select(0, rows)) for out, rows in zip(outs, chunks)]

    def encode_sources(
        self, src_tokens: Tensor, src_lengths: Optional[Tensor], return_all_hiddens: bool, reuse: bool,
        token_embeddings: Optional[Tensor] = None,
    ) -> Dict[str, List[Tensor]]:
        """The sentence-level encoder output, with the lower level's states kept when the
        context reuses a lower level shallower than the encoder."""
        keep_states = reuse and self.num_context_layers < len(self.layers)
        out = self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens or keep_states, token_embeddings)
        out["lower_level"] = [self.source_lower_level(out)] if reuse else []
        if keep_states and not return_all_hiddens:
            out["encoder_states"] = []
            out["fc_results"] = []
        return out

    def source_row_pooling(self, outs: List[Dict[str, List[Tensor]]], chunks: List[Tensor]) -> SourceRowPooling:
        """A function batch rows (R,) → their pooled lower-level vectors s (R, C), reading each
        row from the encoder output of the chunk that holds it."""
        batch = sum(rows.numel() for rows in chunks)
        chunk_of = chunks[0].new_empty(batch)
        local_of = chunks[0].new_empty(batch)
        for number, rows in enumerate(chunks):
            chunk_of[rows] = number
            local_of[rows] = torch.arange(rows.numel(), device=rows.device)

        if len(outs) == 1:  # one pass: no chunk to pick (and no host sync)
            states, mask = outs[0]["lower_level"][0], outs[0]["encoder_padding_mask"][0]
            return lambda rows: self.pooling(states.index_select(1, local_of[rows]), mask.index_select(0, local_of[rows]))

        def pool(rows: Tensor) -> Tensor:
            positions, vectors = [], []
            for number, out in enumerate(outs):
                selected = chunk_of[rows].eq(number)
                if selected.any():
                    local = local_of[rows[selected]]
                    states = out["lower_level"][0].index_select(1, local)
                    mask = out["encoder_padding_mask"][0].index_select(0, local)
                    positions.append(selected.nonzero().squeeze(1))
                    vectors.append(self.pooling(states, mask))
            return torch.cat(vectors).index_select(0, torch.argsort(torch.cat(positions)))

        return pool

    def fuse_context(self, out: Dict[str, List[Tensor]], slots: Tensor, empty: Tensor) -> Dict[str, List[Tensor]]:
        """Upper level over the slots (N, B, C), source-context attention and the gated sum
        into ``out["encoder_out"]`` (eq. 3.6–3.8, 3.17)."""
        out.pop("lower_level", None)
        h_src = out["encoder_out"][0]
        slot_mask, has_context = attendable(empty)
        if self.memory_attention:
            memory = out["encoder_embedding"][0].transpose(0, 1)
            t, _, _ = self.upper(
                slots,
                encoder_out=memory,
                encoder_padding_mask=out["encoder_padding_mask"][0],
                self_attn_padding_mask=slot_mask,
            )
        else:
            t = self.upper(slots, encoder_padding_mask=slot_mask)
        h_ctx, _ = self.context_attn(query=h_src, key=t, value=t, key_padding_mask=slot_mask, need_weights=False)
        fused = self.gated_sum(h_src, self.context_dropout(h_ctx))
        out["encoder_out"] = [without_context(fused, h_src, has_context)]
        return out

