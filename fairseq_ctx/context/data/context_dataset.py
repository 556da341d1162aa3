"""A language-pair dataset whose batches also carry the previous source sentences."""
import logging
from typing import Dict, List

import numpy as np
import torch
from fairseq.data import LanguagePairDataset

from fairseq_ctx.context.data.context_batch import (
    ContextInputs,
    SentenceTable,
    TargetContextKey,
    TargetContextKeys,
    collate_sentences,
    collate_target_context,
    context_sentence,
)
from fairseq_ctx.context.data.docids import document_positions
from fairseq_ctx.core.language_pair_wrapper import LanguagePairWrapper

logger = logging.getLogger(__name__)


class ContextTranslationDataset(LanguagePairWrapper):
    """Wraps a :class:`LanguagePairDataset`; example i gets up to ``context_size`` previous
    source sentences of its own document (Yun (2022) ch. 3: c_0 = nearest, never across documents),
    collated as the batch's :class:`~fairseq_ctx.context.data.context_batch.ContextInputs`. Each
    context sentence is ``[<boc>] + source tokens`` truncated to ``max_context_tokens``, stored once
    per batch; ``context_source_row`` points at the batch's own copy of it when it is a source too.
    With ``document_span`` M > 0 (set by the task for models with a document vector) the batch also
    has ``document_index``: the previous M sentences of each example's document.

    With ``target_context_size`` M > 0 (``--target-context-size``) the previous M reference
    translations of each example's document are its target context (teacher forcing, as Voita et al.
    (2019) train), and the batch also has the
    :class:`~fairseq_ctx.context.data.context_batch.TargetContextKeys` with which decoding reads the
    model's own translations instead: the example ids of each row and of its previous sentences, and
    how many later sentences of the document read it.

    Batch order (``document_window``): 0 orders sentences by length as fairseq's
    ``LanguagePairDataset`` does. W > 0 cuts every document into windows of W consecutive
    sentences, shuffles them (when the pair dataset shuffles) and sorts them by their longest
    sentence, so that batches hold runs of consecutive sentences of similar length: each
    sentence's context is then mostly part of the same batch, and at most N sentences before
    each window need encoding on their own. With ``document_order`` (the task sets it for M > 0
    on every split but the training one) the split is ordered by (position in the document,
    length): sentence i of every document comes before sentence i + 1, so fairseq-generate,
    decoding with its own previous output, finds it translated in an earlier batch.
    """

    EXTRA_TOKENS = "context sentences"
    SMALLER_EXTRA = ", or lower --context-size / --target-context-size / --max-context-tokens"

    def __init__(
        self,
        pair: LanguagePairDataset,
        doc_codes: np.ndarray,
        context_size: int,
        boc_index: int,
        max_context_tokens: int,
        split: str = "",
        document_window: int = 0,
        target_context_size: int = 0,
        target_boc_index: int = -1,
        document_order: bool = False,
    ):
        super().__init__(pair)
        assert len(doc_codes) == len(pair), "docids were validated against the split"
        self.split = split
        positions = document_positions(doc_codes)
        context_size = self._bounded(context_size, positions, "--context-size")
        target_context_size = self._bounded(target_context_size, positions, "--target-context-size")
        self.context_size = context_size
        self.boc_index = boc_index
        self.max_context_tokens = max_context_tokens
        self.pad_index = pair.src_dict.pad()
        self.eos_index = pair.src_dict.eos()
        self.positions = positions
        self.documents = int(np.count_nonzero(self.positions == 0))
        self.later_in_document = _later_in_document(doc_codes, self.positions)
        self.num_context = np.minimum(self.positions, context_size)
        self.document_window = document_window
        self.count_context_tokens = True
        self.document_span = 0
        context_len = np.minimum(pair.src_sizes + 1, max_context_tokens)
        self.context_total_sizes = np.zeros(len(pair), dtype=np.int64)
        for offset in range(1, context_size + 1):
            has = self.num_context >= offset
            self.context_total_sizes[offset:] += np.where(has[offset:], context_len[:-offset], 0)
        self.truncated_contexts = self._count_truncated(pair.src_sizes, self.context_size)
        if self.truncated_contexts:
            logger.warning(
                "context_translation[%s]: %d context sentences are longer than "
                "--max-context-tokens=%d (with <boc>) and are truncated",
                split,
                self.truncated_contexts,
                max_context_tokens,
            )
        self.target_context_size = target_context_size
        self.target_boc_index = target_boc_index
        self.document_order = document_order
        self.num_target_context = np.minimum(self.positions, target_context_size)
        self.target_context_users = np.minimum(self.later_in_document, target_context_size)
        self.target_context_total_sizes = np.zeros(len(pair), dtype=np.int64)
        self.truncated_target_contexts = 0
        if target_context_size > 0 and pair.tgt_sizes is not None:
            target_len = np.minimum(pair.tgt_sizes + 1, max_context_tokens)
            for offset in range(1, target_context_size + 1):
                has = self.num_target_context >= offset
                self.target_context_total_sizes[offset:] += np.where(has[offset:], target_len[:-offset], 0)
            self.truncated_target_contexts = self._count_truncated(pair.tgt_sizes, target_context_size)
            if self.truncated_target_contexts:
                logger.warning(
                    "context_translation[%s]: %d target context sentences are longer than "
                    "--max-context-tokens=%d (with <boc>) and are truncated",
                    split,
                    self.truncated_target_contexts,
                    max_context_tokens,
                )

    def _bounded(self, size: int, positions: np.ndarray, flag: str) -> int:
        """``size`` previous sentences, or as many as the split's longest document gives when that
        is fewer (a sentence can read no more): a context size far above the documents' length
        would only make every batch's context table, and the work, that much larger."""
        longest = int(positions.max()) + 1 if len(positions) else 1
        if size > longest - 1 and size > 1 and self.split:  # a split, not the batch the hub's collater wraps
            logger.info("context_translation[%s]: %s %d, but its longest document has %d sentence(s): each sentence "
                        "reads at most %d previous ones, and the batches are built for that many", self.split, flag,
                        size, longest, longest - 1)
            return max(longest - 1, 1)
        return size

    def _count_truncated(self, sizes: np.ndarray, context_size: int) -> int:
        """Sentences used as context (by a later sentence within ``context_size``) that are longer
        than ``max_context_tokens`` with their ``<boc>``."""
        used_as_context = (self.later_in_document > 0) & (context_size > 0)
        return int(((sizes + 1 > self.max_context_tokens) & used_as_context).sum())

    def describe(self, index: int) -> str:
        return f"sentence {index} of split '{self.split}' (line {index + 1} of its text)"

    def context_sentence(self, index: int) -> torch.Tensor:
        return context_sentence(self.pair.src[index], self.boc_index, self.eos_index, self.max_context_tokens)

    def context_ids(self, index: int) -> List[int]:
        return [index - offset for offset in range(1, int(self.num_context[index]) + 1)]

    def target_context_ids(self, index: int) -> List[int]:
        """The previous target sentences of example ``index`` (example ids, nearest first)."""
        return [index - offset for offset in range(1, int(self.num_target_context[index]) + 1)]

    def target_context_of(self, index: int) -> torch.Tensor:
        """The reference translation of example ``index`` as a target context sentence."""
        tgt_dict = self.pair.tgt_dict
        return context_sentence(self.pair.tgt[index], self.target_boc_index, tgt_dict.eos(),
                                self.max_context_tokens)

    def __getitem__(self, index: int) -> Dict:
        item = self.pair[index]
        item["context_ids"] = self.context_ids(index)
        if self.target_context_size > 0:
            item["target_context_ids"] = self.target_context_ids(index)
        return item

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if len(samples) == 0 or "net_input" not in batch:
            return batch
        ids = batch["id"].tolist()
        context_of = {s["id"]: s["context_ids"] for s in samples}
        table = SentenceTable()
        context = ContextInputs(context_index=table.slots([context_of[i] for i in ids], max(self.context_size, 1)))
        if self.document_span > 0:
            context.document_index = table.slots(
                [[i - slot - 1 for slot in range(min(int(self.positions[i]), self.document_span))] for i in ids],
                self.document_span)
        unique = table.keys()
        sentences = [self.context_sentence(i) for i in unique]
        source_row = {example_id: row for row, example_id in enumerate(ids)}
        untruncated = [s.numel() == self.pair.src_sizes[i] + 1 for i, s in zip(unique, sentences)]
        context.context_source_row = torch.tensor(
            [source_row.get(i, -1) if whole else -1 for i, whole in zip(unique, untruncated)], dtype=torch.long
        )
        context.context_tokens = collate_sentences(sentences, self.pad_index)
        if self.target_context_size > 0:
            previous = {s["id"]: s["target_context_ids"] for s in samples}
            context = self._with_target_context(batch, context, [previous[i] for i in ids])
        batch["net_input"].update(context.net_input())
        return batch

    def _with_target_context(self, batch: Dict, context: ContextInputs, previous: List[List[int]]) -> ContextInputs:
        """The reference translations as target context, and the keys of decoding with the model's
        own output instead (the example ids of each row's previous target sentences)."""
        size = self.target_context_size
        read = previous if self.pair.tgt is not None else [[] for _ in previous]
        context = context.with_target_context(
            *collate_target_context(read, self.target_context_of, size, self.pair.tgt_dict.pad()))
        keys = [TargetContextKey(i, p, int(self.target_context_users[i])) for i, p in zip(batch["id"].tolist(), previous)]
        batch.update(TargetContextKeys.of_rows(keys, size).entries())
        return context

    def extra_tokens(self, indices: np.ndarray) -> np.ndarray:
        """The tokens of every context sentence when ``count_context_tokens`` (the task turns
        that off for models that reuse in-batch source encodings under document-window
        batching, where contexts cost almost nothing extra; in ``document_order`` they are
        counted, as there are no document windows), plus the tokens of every target context
        sentence (always counted)."""
        extra = self.target_context_total_sizes[indices]
        if self.count_context_tokens or self.document_order:
            return extra + self.context_total_sizes[indices]
        return extra

    def ordered_indices(self) -> np.ndarray:
        if self.document_order:
            return np.lexsort((self._lengths(), self.positions)).astype(np.int64)
        if self.document_window <= 0:
            return self.pair.ordered_indices()
        starts = np.flatnonzero((self.positions % self.document_window) == 0)
        ends = np.append(starts[1:], len(self))
        order = np.random.permutation(len(starts)) if self.pair.shuffle else np.arange(len(starts))
        longest = np.maximum.reduceat(self._lengths(), starts)
        order = order[np.argsort(longest[order], kind="mergesort")]
        return np.concatenate([np.arange(starts[w], ends[w]) for w in order]).astype(np.int64)

    def _lengths(self) -> np.ndarray:
        if self.pair.tgt_sizes is None:
            return self.pair.src_sizes
        return np.maximum(self.pair.src_sizes, self.pair.tgt_sizes)


def _later_in_document(codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Number of sentences after each sentence in its document (codes are consecutive per document)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    lengths = np.diff(np.append(starts, len(codes)))
    return np.repeat(lengths, lengths) - positions - 1
