"""Allow-list for loading fairseq checkpoints with torch's weights-only unpickler.

torch >= 2.6 loads with ``weights_only=True``: only tensors, primitive containers and
allow-listed classes may be unpickled, so a checkpoint cannot run code. fairseq stores its
configuration as plain containers except the legacy model arguments, an
``argparse.Namespace`` (checked with ``torch.serialization.get_unsafe_globals_in_checkpoint``
on checkpoints written by fairseq-train), so exactly that class is allowed. Weights-only
loading itself is never switched off.
"""
import argparse
from typing import List

import torch

FAIRSEQ_CHECKPOINT_GLOBALS: List[type] = [argparse.Namespace]


def allow_fairseq_checkpoints() -> None:
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:
        add_safe_globals(FAIRSEQ_CHECKPOINT_GLOBALS)
