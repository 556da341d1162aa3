"""Batching that keeps every example of a split.

fairseq's ``data_utils.batch_by_size`` drops its last batch when that batch's size is not a
multiple of ``--required-batch-size-multiple`` (default 8; fairseq issue #5036): the fast
batcher (``data_utils_fast.batch_by_size_vec``) already splits the tail into a multiple-of-N
part and a remainder of fewer than N examples, and ``batch_by_size`` then discards that
remainder. ``fairseq-generate --batch-size 128`` on a 1,341-sentence split thus translates
1,336 sentences without a word, and training and validation lose the same examples.
:func:`complete_batches` gives the examples back as one more (small) batch.
"""
from typing import List, Sequence

import numpy as np


def complete_batches(indices: Sequence[int], batches: List[np.ndarray]) -> List[np.ndarray]:
    """``batches`` plus, as one more batch in their order in ``indices``, the indices that no
    batch holds (none with ``--required-batch-size-multiple 1``)."""
    indices = np.asarray(indices, dtype=np.int64)
    if sum(len(batch) for batch in batches) >= len(indices):
        return batches
    batched = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
    missing = indices[np.isin(indices, batched, invert=True)]
    return [*batches, missing] if len(missing) else batches
