"""Recurrent layers in float32 under CPU mixed precision where the CPU has no bfloat16 LSTM.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (the plugin's ``--amp`` on the CPU) torch
hands an ``nn.LSTM`` to oneDNN in bfloat16, and oneDNN builds a bfloat16 LSTM only on CPUs with
native bfloat16 products: on others it fails with "could not create a primitive descriptor for the
LSTM forward propagation primitive", naming neither the cause nor a fix. On such CPUs
(:func:`~fairseq_ctx.core.mixed_precision.native_bfloat16` false) the LSTMs of ``laser_bilstm`` run
in float32 inside the autocast region, while its embeddings and output projection keep autocast's
bfloat16 products (``multisource_rnn``'s GRUs are not handed to oneDNN and run under autocast on
every CPU). Where the CPU has them, the bfloat16 LSTM is kept: it runs the
LASER recurrences in 0.54x float32's time (benchmarks/recurrence_precision.py, one thread, AVX512-BF16
and AMX). On CUDA autocast is left as it is (cuDNN runs half-precision RNNs).
"""
import contextlib
from typing import Iterator

import torch

from fairseq_ctx.core.mixed_precision import native_bfloat16


@contextlib.contextmanager
def float32_recurrence(device: torch.device) -> Iterator[None]:
    """Switch CPU autocast off inside the block when ``device`` is a CPU without native bfloat16
    products and autocast is on there; the caller passes inputs in the layer's own dtype
    (float32 under ``--amp``), which autocast, where it stays on, casts as before."""
    if device.type == "cpu" and torch.is_autocast_enabled("cpu") and not native_bfloat16():
        with torch.autocast("cpu", enabled=False):
            yield
    else:
        yield
