"""Base for datasets that add inputs to the batches of a fairseq LanguagePairDataset."""
from typing import Dict, List

import numpy as np
from fairseq.data import FairseqDataset, LanguagePairDataset

from fairseq_ctx.core.complete_batches import complete_batches


class LanguagePairWrapper(FairseqDataset):
    """Delegates examples, sizes, ordering, filtering and epochs to the wrapped ``pair``;
    subclasses add their inputs in ``__getitem__``/``collater`` and count them in
    ``extra_tokens``. Used as is, it is ``pair`` with batches that keep every example
    (:func:`~fairseq_ctx.core.complete_batches.complete_batches`)."""

    def __init__(self, pair: LanguagePairDataset):
        super().__init__()
        self.pair = pair

    def __len__(self) -> int:
        return len(self.pair)

    def __getitem__(self, index: int) -> Dict:
        return self.pair[index]

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        return self.pair.collater(samples, pad_to_length=pad_to_length)

    @property
    def src(self):
        return self.pair.src

    @property
    def tgt(self):
        return self.pair.tgt

    def extra_tokens(self, indices: np.ndarray) -> np.ndarray:
        """Tokens an example adds to its source side in the token budget (none by default)."""
        return np.zeros(len(indices), dtype=np.int64)

    def num_tokens(self, index: int) -> int:
        return int(self.num_tokens_vec(np.array([index]))[0])

    def num_tokens_vec(self, indices: np.ndarray) -> np.ndarray:
        sizes = self.pair.src_sizes[indices].astype(np.int64) + self.extra_tokens(indices)
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

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        """fairseq's batching, with the examples it drops given back as a last batch."""
        batches = super().batch_by_size(indices, max_tokens, max_sentences, required_batch_size_multiple)
        return complete_batches(indices, batches)

    @property
    def supports_prefetch(self) -> bool:
        return False

    def set_epoch(self, epoch: int):
        super().set_epoch(epoch)
        self.pair.set_epoch(epoch)
