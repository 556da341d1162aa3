"""Base for datasets that add inputs to the batches of a fairseq LanguagePairDataset."""
import numpy as np
from fairseq.data import FairseqDataset, LanguagePairDataset


class LanguagePairWrapper(FairseqDataset):
    """Delegates sizes, ordering, filtering and epochs to the wrapped ``pair``; subclasses add
    their inputs in ``__getitem__``/``collater`` and count them in ``extra_tokens``."""

    def __init__(self, pair: LanguagePairDataset):
        super().__init__()
        self.pair = pair

    def __len__(self) -> int:
        return len(self.pair)

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

    @property
    def supports_prefetch(self) -> bool:
        return False

    def set_epoch(self, epoch: int):
        super().set_epoch(epoch)
        self.pair.set_epoch(epoch)
