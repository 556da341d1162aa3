"""A language-pair dataset whose batches also carry the previous source sentences."""
import logging
from typing import Dict, List

import numpy as np
import torch
from fairseq.data import FairseqDataset, LanguagePairDataset, data_utils

from fairseq_ctx.data.docids import document_positions

logger = logging.getLogger(__name__)


class ContextTranslationDataset(FairseqDataset):
    """Wraps a :class:`LanguagePairDataset`; example i gets up to ``context_size`` previous
    source sentences of its own document (SPEC §1: c_0 = nearest, never across documents).

    Each context sentence is ``[<boc>] + source tokens`` (ending in ``</s>``), truncated to
    ``max_context_tokens``. A batch stores every distinct context sentence once:

    - ``net_input["context_tokens"]``: (U, Lc) right-padded unique context sentences,
    - ``net_input["context_index"]``: (B, N) row of ``context_tokens`` for slot n of example
      b, or -1 for an empty slot (document-initial sentences have only empty slots).
    """

    def __init__(
        self,
        pair: LanguagePairDataset,
        doc_codes: np.ndarray,
        context_size: int,
        boc_index: int,
        max_context_tokens: int,
        split: str = "",
    ):
        super().__init__()
        assert len(doc_codes) == len(pair), "docids were validated against the split"
        self.pair = pair
        self.context_size = context_size
        self.boc_index = boc_index
        self.max_context_tokens = max_context_tokens
        self.pad_index = pair.src_dict.pad()
        self.eos_index = pair.src_dict.eos()
        self.num_context = np.minimum(document_positions(doc_codes), context_size)
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

    def __len__(self) -> int:
        return len(self.pair)

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if len(samples) == 0 or "net_input" not in batch:
            return batch
        context_of = {s["id"]: s["context_ids"] for s in samples}
        unique: Dict[int, int] = {}
        index = torch.full((len(batch["id"]), max(self.context_size, 1)), -1, dtype=torch.long)
        for row, example_id in enumerate(batch["id"].tolist()):
            for slot, context_id in enumerate(context_of[example_id]):
                index[row, slot] = unique.setdefault(context_id, len(unique))
        sentences = [self.context_sentence(i) for i in unique]
        if sentences:
            tokens = data_utils.collate_tokens(sentences, self.pad_index, left_pad=False)
        else:
            tokens = torch.full((0, 1), self.pad_index, dtype=torch.long)
        batch["net_input"]["context_tokens"] = tokens
        batch["net_input"]["context_index"] = index
        return batch

    def num_tokens(self, index: int) -> int:
        return max(
            int(self.pair.src_sizes[index]) + int(self.context_total_sizes[index]),
            int(self.pair.tgt_sizes[index]) if self.pair.tgt_sizes is not None else 0,
        )

    def num_tokens_vec(self, indices: np.ndarray) -> np.ndarray:
        sizes = self.pair.src_sizes[indices] + self.context_total_sizes[indices]
        if self.pair.tgt_sizes is not None:
            sizes = np.maximum(sizes, self.pair.tgt_sizes[indices])
        return sizes

    def size(self, index: int):
        return self.pair.size(index)

    @property
    def sizes(self):
        return self.pair.sizes

    @property
    def src_sizes(self):
        return self.pair.src_sizes

    @property
    def tgt_sizes(self):
        return self.pair.tgt_sizes

    def ordered_indices(self) -> np.ndarray:
        return self.pair.ordered_indices()

    def filter_indices_by_size(self, indices, max_sizes):
        return self.pair.filter_indices_by_size(indices, max_sizes)

    def set_epoch(self, epoch: int):
        super().set_epoch(epoch)
        self.pair.set_epoch(epoch)
