"""Which tensors reach a model's modules on another device than the model's: a forward pre-hook on
every module of every model loaded from a checkpoint while the watch is active."""
import contextlib
import functools
from typing import Iterator, List, Set, Tuple

import torch


def tensors_in(value, where: str, depth: int = 0) -> Iterator[Tuple[str, torch.Tensor]]:
    """(path, tensor) of every tensor in nested tuples, lists and dicts (fairseq's encoder_out and
    incremental state)."""
    if torch.is_tensor(value):
        yield where, value
    elif depth < 6 and isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from tensors_in(item, f"{where}[{index}]", depth + 1)
    elif depth < 6 and isinstance(value, dict):
        for key, item in value.items():
            yield from tensors_in(item, f"{where}.{key}", depth + 1)


class DeviceWatch:
    """While active, every model loaded from a checkpoint (through fairseq's ``checkpoint_utils.
    load_model_ensemble_and_task``, which fairseq-generate, fairseq-interactive, the hub and the
    tools call) gets a forward pre-hook on each of its modules recording each tensor argument that
    is not on the device of the model's parameters at the time of the call."""

    def __init__(self) -> None:
        self.calls = 0
        self.model_devices: Set[str] = set()
        self.off_device: List[str] = []

    def watch(self, model: torch.nn.Module) -> None:
        def check(name: str, args: tuple, kwargs: dict) -> None:
            device = next(model.parameters()).device
            self.calls += 1
            self.model_devices.add(str(device))
            for where, tensor in tensors_in({"args": args, "kwargs": kwargs}, name or type(model).__name__):
                if tensor.device != device:
                    self.off_device.append(f"{where} on {tensor.device}, model on {device}")

        for name, module in model.named_modules():
            module.register_forward_pre_hook(lambda _, args, kwargs, name=name: check(name, args, kwargs),
                                             with_kwargs=True)

    @contextlib.contextmanager
    def active(self) -> Iterator["DeviceWatch"]:
        from fairseq import checkpoint_utils

        original = checkpoint_utils.load_model_ensemble_and_task

        @functools.wraps(original)  # keeps its signature for the plugin's hook, which may wrap this
        def load_and_watch(*args, **kwargs):
            ensemble, cfg, task = original(*args, **kwargs)
            for model in ensemble:
                self.watch(model)
            return ensemble, cfg, task

        checkpoint_utils.load_model_ensemble_and_task = load_and_watch
        try:
            yield self
        finally:
            checkpoint_utils.load_model_ensemble_and_task = original
