"""Hooks that a criterion installs lazily on the model it is first called with."""
from typing import Callable, Optional, Protocol

from torch import nn

from fairseq_ctx.core.length_chunks import use_single_pass


def unwrap(model: nn.Module) -> nn.Module:
    """The fairseq model inside DDP / fairseq's ModuleProxyWrapper."""
    while isinstance(getattr(model, "module", None), nn.Module):
        model = model.module
    return model


class Hooks(Protocol):
    """What a hook factory builds: hooks on a model that :meth:`remove` takes off again."""

    def remove(self) -> None: ...


class ModelHooks:
    """Builds ``factory(model)`` once per model instance (re-built, the old hooks removed, if a
    different model is passed).

    Hooks expect one call per module and batch, so the model's fast paths that break that
    (:class:`~fairseq_ctx.core.length_chunks.SinglePass`: hce/hmce's length chunks, T-MDE's
    position-0 last layer) are switched off first."""

    def __init__(self, factory: Callable[[nn.Module], Hooks]):
        self.factory = factory
        self.model: Optional[nn.Module] = None
        self.hooks: Optional[Hooks] = None

    def for_model(self, model: nn.Module) -> Hooks:
        model = unwrap(model)
        if self.model is not model:
            if self.hooks is not None:
                self.hooks.remove()
            use_single_pass(model)
            self.model, self.hooks = model, self.factory(model)
        return self.hooks
