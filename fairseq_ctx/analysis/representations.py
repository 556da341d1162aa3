"""Named intermediate representations of a model, for losses such as ``cka_alignment``.

The interface, for model authors
--------------------------------
A model exposes representations by name in one of two ways:

1. It defines ``named_representations(self) -> Dict[str, Representation]`` returning the tensors
   of its **last forward call** as ``Representation(states, padding_mask)``, ``states`` (B, T, d)
   and ``padding_mask`` (B, T), True at padding (or None). The multimodal models use names like
   ``text`` and ``image``.
2. Or an adapter class is registered for the model class with
   :func:`register_representation_adapter`; adapters collect the tensors with forward hooks so
   the model file stays untouched. The most specific registered class in the model's MRO wins.

Built in: fairseq's ``TransformerModel`` (stock ``transformer`` and everything derived from it):
``encoder_embedding``, ``encoder_out``, ``decoder_out``.
"""
from typing import Callable, Dict, List, NamedTuple, Optional, Type

from fairseq.models.transformer import TransformerModel
from torch import Tensor, nn


class Representation(NamedTuple):
    states: Tensor
    padding_mask: Optional[Tensor]


class RepresentationAdapter:
    """Collects named representations of one model instance; subclasses add hooks in ``__init__``."""

    def __init__(self, model: nn.Module):
        self.model = model
        self._handles: List = []

    def collect(self, sample: dict) -> Dict[str, Representation]:
        raise NotImplementedError

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class _ModelMethodAdapter(RepresentationAdapter):
    def collect(self, sample: dict) -> Dict[str, Representation]:
        return dict(self.model.named_representations())


_ADAPTERS: Dict[Type[nn.Module], Type[RepresentationAdapter]] = {}


def register_representation_adapter(model_cls: Type[nn.Module]) -> Callable:
    def wrap(adapter_cls: Type[RepresentationAdapter]) -> Type[RepresentationAdapter]:
        _ADAPTERS[model_cls] = adapter_cls
        return adapter_cls
    return wrap


def representation_adapter(model: nn.Module) -> RepresentationAdapter:
    """The adapter for ``model``: its own ``named_representations`` method, else a registered one."""
    if callable(getattr(model, "named_representations", None)):
        return _ModelMethodAdapter(model)
    for cls in type(model).__mro__:
        if cls in _ADAPTERS:
            return _ADAPTERS[cls](model)
    raise ValueError(
        f"{type(model).__name__} exposes no named representations: define named_representations() on the "
        f"model or register an adapter with fairseq_ctx.analysis.representations.register_representation_adapter"
    )


def select(representations: Dict[str, Representation], name: str) -> Representation:
    if name not in representations:
        raise ValueError(f"the model does not expose a representation named {name!r}; "
                         f"available: {sorted(representations)}")
    return representations[name]


@register_representation_adapter(TransformerModel)
class TransformerRepresentations(RepresentationAdapter):
    """``encoder_embedding`` (token embeddings), ``encoder_out`` (final encoder states; for HCE/HMCE
    the context-fused states), ``decoder_out`` (decoder features before the output projection)."""

    def __init__(self, model: TransformerModel):
        super().__init__(model)
        self._encoder: Optional[dict] = None
        self._decoder: Optional[Tensor] = None
        self._handles.append(model.encoder.register_forward_hook(self._on_encoder))
        projection = getattr(model.decoder, "output_projection", None)
        if projection is not None:
            self._handles.append(projection.register_forward_pre_hook(self._on_decoder))

    def _on_encoder(self, _module, _inputs, output):
        self._encoder = output

    def _on_decoder(self, _module, inputs):
        self._decoder = inputs[0]

    def collect(self, sample: dict) -> Dict[str, Representation]:
        net_input = sample["net_input"]
        out: Dict[str, Representation] = {}
        if self._encoder is not None:
            masks = self._encoder.get("encoder_padding_mask") or [None]
            mask = masks[0]
            out["encoder_out"] = Representation(self._encoder["encoder_out"][0].transpose(0, 1), mask)
            embedding = self._encoder.get("encoder_embedding") or []
            if embedding:
                out["encoder_embedding"] = Representation(embedding[0], mask)
        if self._decoder is not None:
            prev = net_input["prev_output_tokens"]
            out["decoder_out"] = Representation(self._decoder, prev.eq(self.model.decoder.padding_idx))
        return out
