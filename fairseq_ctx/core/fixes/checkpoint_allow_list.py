"""The fix ``checkpoint-allow-list``: the classes fairseq checkpoints hold, allowed in torch's
weights-only unpickler.

torch >= 2.6 loads with ``weights_only=True``: only tensors, primitive containers and
allow-listed classes may be unpickled, so a checkpoint cannot run code. Checked with
``torch.serialization.get_unsafe_globals_in_checkpoint`` on checkpoints written by
fairseq-train, fairseq stores besides those: the legacy model arguments
(``argparse.Namespace``) and, with ``--eval-bleu``, the BLEU counts as numpy arrays
(``ndarray`` and numpy scalars with their ``_reconstruct``/``scalar`` helpers, ``dtype`` and the numeric dtype classes). Exactly
these are allowed; weights-only loading itself is never switched off.
"""
import argparse
from typing import List

import numpy as np
import torch

try:
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct, scalar

NUMERIC_DTYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float16, np.float32, np.float64)


def fairseq_checkpoint_globals() -> List[object]:
    return [argparse.Namespace, np.ndarray, np.dtype, _reconstruct, scalar, *(type(np.dtype(t)) for t in NUMERIC_DTYPES)]


def allow_fairseq_checkpoints() -> None:
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:
        add_safe_globals(fairseq_checkpoint_globals())
