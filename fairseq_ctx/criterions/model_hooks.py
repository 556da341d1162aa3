"""Hooks that a criterion installs lazily on the model it is first called with."""
from typing import Callable, Optional

from torch import nn


def unwrap(model: nn.Module) -> nn.Module:
    """The fairseq model inside DDP / fairseq's ModuleProxyWrapper."""
    while isinstance(getattr(model, "module", None), nn.Module):
        model = model.module
    return model


class ModelHooks:
    """Builds ``factory(model)`` once per model instance (re-built if a different model is passed)."""

    def __init__(self, factory: Callable[[nn.Module], object]):
        self.factory = factory
        self.model: Optional[nn.Module] = None
        self.hooks = None

    def for_model(self, model: nn.Module):
        model = unwrap(model)
        if self.model is not model:
            if self.hooks is not None and hasattr(self.hooks, "remove"):
                self.hooks.remove()
            self.model, self.hooks = model, self.factory(model)
        return self.hooks
