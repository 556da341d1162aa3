"""A language-pair dataset whose batches also carry the previous source sentences."""
import logging
from typing import Dict, List

import numpy as np
import torch
from fairseq.data import LanguagePairDataset, data_utils

from fairseq_ctx.context.data.docids import document_positions
from fairseq_ctx.core.language_pair_wrapper import LanguagePairWrapper

logger = logging.getLogger(__name__)


class ContextTranslationDataset(LanguagePairWrapper):
    """Wraps a :class:`LanguagePairDataset`; example i gets up to ``context_size`` previous
    source sentences of its own document (Yun (2022) ch. 3: c_0 = nearest, never across documents).

    Each context sentence is ``[<boc>] + source tokens`` (ending in ``</s>``), truncated to
    ``max_context_tokens``. A batch stores every distinct context sentence once:

    - ``net_input["context_tokens"]``: (U, Lc) right-padded unique context sentences,
    - ``net_input["context_index"]``: (B, N) row of ``context_tokens`` for slot n of example
      b, or -1 for an empty slot (document-initial sentences have only empty slots),
    - ``net_input["context_source_row"]``: (U,) the row of ``src_tokens`` that holds the same
      (untruncated) sentence as context row u, or -1 when that sentence is not a source of
      the batch. Models whose context encoding equals their source encoding (HCE/HMCE with
      shared layers) reuse those rows instead of encoding the sentence again.

    With ``document_span`` M > 0 (set by the task for models with a document vector) the
    batch also has ``net_input["document_index"]``: (B, M) rows of ``context_tokens`` holding
    the previous M sentences of each example's document (nearest first, -1 when absent).

    Batch order (``document_window``): 0 orders sentences by length as fairseq's
    ``LanguagePairDataset`` does. W > 0 cuts every document into windows of W consecutive
    sentences, shuffles them (when the pair dataset shuffles) and sorts them by their longest
    sentence, so that batches hold runs of consecutive sentences of similar length: each
    sentence's context is then mostly part of the same batch, and at most N sentences before
    each window need encoding on their own.
    """

    def __init__(
        self,
        pair: LanguagePairDataset,
        doc_codes: np.ndarray,
        context_size: int,
        boc_index: int,
        max_context_tokens: int,
        split: str = "",
        document_window: int = 0,
    ):
        super().__init__(pair)
        assert len(doc_codes) == len(pair), "docids were validated against the split"
        self.context_size = context_size
        self.boc_index = boc_index
        self.max_context_tokens = max_context_tokens
        self.pad_index = pair.src_dict.pad()
        self.eos_index = pair.src_dict.eos()
        self.positions = document_positions(doc_codes)
        self.num_context = np.minimum(self.positions, context_size)
        self.document_window = document_window
        self.count_context_tokens = True
        self.document_span = 0
        context_len = np.minimum(pair.src_sizes + 1, max_context_tokens)
        self.context_total_sizes = np.zeros(len(pair), dtype=np.int64)
        for offset in range(1, context_size + 1):
            has = self.num_context >= offset
            self.context_total_sizes[offset:] += np.where(has[offset:], context_len[:-offset], 0)
        self.truncated_contexts = self._count_truncated(pair.src_sizes)
        if self.truncated_contexts:
            logger.warning(
                "context_translation[%s]: %d context sentences are longer than "
                "--max-context-tokens=%d (with <boc>) and are truncated",
                split,
                self.truncated_contexts,
                max_context_tokens,
            )

    def _count_truncated(self, src_sizes: np.ndarray) -> int:
        used_as_context = np.zeros(len(src_sizes), dtype=bool)
        for offset in range(1, self.context_size + 1):
            used_as_context[:-offset] |= self.num_context[offset:] >= offset
        return int(((src_sizes + 1 > self.max_context_tokens) & used_as_context).sum())

    def context_sentence(self, index: int) -> torch.Tensor:
        tokens = self.pair.src[index]
        sentence = torch.cat([tokens.new_tensor([self.boc_index]), tokens])
        if sentence.numel() > self.max_context_tokens:
            sentence = torch.cat([sentence[: self.max_context_tokens - 1], sentence.new_tensor([self.eos_index])])
        return sentence

    def context_ids(self, index: int) -> List[int]:
        return [index - offset for offset in range(1, int(self.num_context[index]) + 1)]

    def __getitem__(self, index: int) -> Dict:
        item = self.pair[index]
        item["context_ids"] = self.context_ids(index)
        return item

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if len(samples) == 0 or "net_input" not in batch:
            return batch
        context_of = {s["id"]: s["context_ids"] for s in samples}
        source_row = {example_id: row for row, example_id in enumerate(batch["id"].tolist())}
        unique: Dict[int, int] = {}
        index = torch.full((len(source_row), max(self.context_size, 1)), -1, dtype=torch.long)
        for example_id, row in source_row.items():
            for slot, context_id in enumerate(context_of[example_id]):
                index[row, slot] = unique.setdefault(context_id, len(unique))
        if self.document_span > 0:
            document = torch.full((len(source_row), self.document_span), -1, dtype=torch.long)
            for example_id, row in source_row.items():
                for slot in range(min(int(self.positions[example_id]), self.document_span)):
                    document[row, slot] = unique.setdefault(example_id - slot - 1, len(unique))
            batch["net_input"]["document_index"] = document
        sentences = [self.context_sentence(i) for i in unique]
        untruncated = [s.numel() == self.pair.src_sizes[i] + 1 for i, s in zip(unique, sentences)]
        batch["net_input"]["context_source_row"] = torch.tensor(
            [source_row.get(i, -1) if whole else -1 for i, whole in zip(unique, untruncated)], dtype=torch.long
        )
        if sentences:
            tokens = data_utils.collate_tokens(sentences, self.pad_index, left_pad=False)
        else:
            tokens = torch.full((0, 1), self.pad_index, dtype=torch.long)
        batch["net_input"]["context_tokens"] = tokens
        batch["net_input"]["context_index"] = index
        return batch

    def extra_tokens(self, indices: np.ndarray) -> np.ndarray:
        """The tokens of every context sentence when ``count_context_tokens`` (the task turns
        that off for models that reuse in-batch source encodings under document-window
        batching, where contexts cost almost nothing extra)."""
        if self.count_context_tokens:
            return self.context_total_sizes[indices]
        return super().extra_tokens(indices)

    def ordered_indices(self) -> np.ndarray:
        if self.document_window <= 0:
            return self.pair.ordered_indices()
        starts = np.flatnonzero((self.positions % self.document_window) == 0)
        ends = np.append(starts[1:], len(self))
        order = np.random.permutation(len(starts)) if self.pair.shuffle else np.arange(len(starts))
        lengths = self.pair.src_sizes if self.pair.tgt_sizes is None else np.maximum(self.pair.src_sizes, self.pair.tgt_sizes)
        longest = np.maximum.reduceat(lengths, starts)
        order = order[np.argsort(longest[order], kind="mergesort")]
        return np.concatenate([np.arange(starts[w], ends[w]) for w in order]).astype(np.int64)
