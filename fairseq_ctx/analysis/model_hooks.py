"""Hooks that a criterion installs lazily on the model it is first called with."""
from typing import Callable, Optional

from torch import nn


def unwrap(model: nn.Module) -> nn.Module:
    """The fairseq model inside DDP / fairseq's ModuleProxyWrapper."""
    while isinstance(getattr(model, "module", None), nn.Module):
        model = model.module
    return model


class ModelHooks:
    """Builds ``factory(model)`` once per model instance (re-built if a different model is passed).

    Hooks expect one call per module and batch, so a model that can split a batch into
    length chunks (``use_single_pass``, hce/hmce) is switched to one pass first."""

    def __init__(self, factory: Callable[[nn.Module], object]):
        self.factory = factory
        self.model: Optional[nn.Module] = None
        self.hooks = None

    def for_model(self, model: nn.Module):
        model = unwrap(model)
        if self.model is not model:
            if self.hooks is not None and hasattr(self.hooks, "remove"):
                self.hooks.remove()
            if hasattr(model, "use_single_pass"):
                model.use_single_pass()
            self.model, self.hooks = model, self.factory(model)
        return self.hooks
