"""Base for datasets that add inputs to the batches of a fairseq LanguagePairDataset."""
from typing import Dict, List, Optional

import numpy as np
from fairseq.data import FairseqDataset, LanguagePairDataset

from fairseq_ctx.core.complete_batches import complete_batches


class BatchLimitError(ValueError):
    """``--max-tokens`` / ``--batch-size`` that cannot batch the examples of a split."""


class LanguagePairWrapper(FairseqDataset):
    """Delegates examples, sizes, ordering, filtering and epochs to the wrapped ``pair``;
    subclasses add their inputs in ``__getitem__``/``collater``, count them in ``extra_tokens``
    (named by ``EXTRA_TOKENS``, with ``SMALLER_EXTRA`` saying how to make them fewer) and name an
    example in errors with :meth:`describe`. Used as is, it is ``pair`` with batches that keep
    every example (:func:`~fairseq_ctx.core.complete_batches.complete_batches`) and batch limits
    checked before batching (:meth:`check_batch_limits`)."""

    EXTRA_TOKENS = "other inputs"
    SMALLER_EXTRA = ""

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

    def describe(self, index: int) -> str:
        """The example in words, for errors (its line in the split's text)."""
        return f"sentence {index} (line {index + 1} of the text)"

    def check_batch_limits(self, indices: np.ndarray, max_tokens: Optional[int], max_sentences: Optional[int]) -> None:
        """A batch holds at least one example: a limit below 1, or an example with more tokens (its
        source with everything counted with it, or its target) than ``--max-tokens``, is a
        :class:`BatchLimitError` naming the example and the size needed. fairseq alone stops with
        an assertion about an index, or loops."""
        if max_sentences is not None and max_sentences < 1:
            raise BatchLimitError(f"--batch-size {max_sentences} must be at least 1 (sentences per batch; leave it "
                                  f"out to batch by --max-tokens alone)")
        if max_tokens is None:
            return
        if max_tokens < 1:
            raise BatchLimitError(f"--max-tokens {max_tokens} must be at least 1 (tokens per batch)")
        indices = np.asarray(indices, dtype=np.int64)
        sizes = self.num_tokens_vec(indices)
        over = np.flatnonzero(sizes > max_tokens)
        if not len(over):
            return
        largest = int(indices[over[np.argmax(sizes[over])]])
        source = int(self.pair.src_sizes[largest])
        extra = int(self.extra_tokens(np.array([largest]))[0])
        parts = f"{source} source tokens" + (f" + {extra} tokens of its {self.EXTRA_TOKENS}" if extra else "")
        if self.pair.tgt_sizes is not None:
            parts += f"; target {int(self.pair.tgt_sizes[largest])} tokens"
        count = "1 example does" if len(over) == 1 else f"{len(over)} examples do"
        raise BatchLimitError(
            f"--max-tokens {max_tokens} is too small: {count} not fit in a batch of its own, the largest "
            f"{self.describe(largest)} with {int(sizes.max())} tokens ({parts}). Raise --max-tokens to at least "
            f"{int(sizes.max())}{self.SMALLER_EXTRA if extra else ''}")

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        """fairseq's batching, with the limits checked first and the examples it drops given back as
        a last batch."""
        self.check_batch_limits(indices, max_tokens, max_sentences)
        batches = super().batch_by_size(indices, max_tokens, max_sentences, required_batch_size_multiple)
        return complete_batches(indices, batches)

    @property
    def supports_prefetch(self) -> bool:
        return False

    def set_epoch(self, epoch: int):
        super().set_epoch(epoch)
        self.pair.set_epoch(epoch)
