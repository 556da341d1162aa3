"""Losses and statistics kept in float32 under mixed precision.

Under autocast (fairseq's ``--amp`` on CUDA, and on the CPU with the plugin's tasks) a matrix
product of two float32 tensors still runs in the lower precision: upcasting the inputs alone does
not keep CKA, HSIC or a distance in float32. Functions decorated with :func:`without_autocast`
run with autocast switched off on the device of their tensors, so their upcast inputs are
multiplied in float32 (or float64 where asked) and gradients flow back to the half-precision
activations unchanged.
"""
import functools
from typing import Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable)


def without_autocast(function: F) -> F:
    """Decorator: call ``function`` with autocast off on the device of its first tensor argument."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        device = next((value.device.type for value in (*args, *kwargs.values()) if isinstance(value, torch.Tensor)),
                      "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
