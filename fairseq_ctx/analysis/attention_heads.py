"""Forward hooks on every fairseq ``MultiheadAttention`` of any model (ours or fairseq's stock
``transformer``): per-head output capture for HSIC/CKA/SVCCA, value-vector capture for the
orthogonality term, and drophead (Yun 2022, §4.3).

Per-head outputs are the input of ``out_proj`` (the heads' concatenated outputs, before the output
projection), reshaped to (T, B, H, d_head). Hooked modules are switched to fairseq's own
attention code path (``skip_embed_dim_check``), because the fused PyTorch path never calls
``out_proj`` as a module; the numbers are the same, the old setting is restored on removal.
"""
import fnmatch
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from fairseq_ctx.core.length_chunks import use_single_pass


def attention_modules(model: nn.Module, patterns: Sequence[str] = ("*",)) -> Dict[str, MultiheadAttention]:
    """Every MultiheadAttention of ``model`` whose qualified name matches one of the glob patterns.
    The model's fast paths that would bypass a module call (length chunks, T-MDE's position-0
    last layer) are switched off, so the hooks act on every call of every selected module."""
    use_single_pass(model)
    found = {
        name: module for name, module in model.named_modules()
        if isinstance(module, MultiheadAttention) and any(fnmatch.fnmatch(name, p) for p in patterns)
    }
    if not found:
        every = [name for name, m in model.named_modules() if isinstance(m, MultiheadAttention)]
        raise ValueError(f"no MultiheadAttention matches {list(patterns)}; the model has: {every}")
    return found


ENCODER_LAYERS = re.compile(r"encoder\.(text_encoder\.)?layers\.")


def module_kind(name: str) -> str:
    """encoder_self / decoder_self / encoder_decoder / other (e.g. the HCE context attentions).
    In the multi-source Transformer the text encoder's self-attention
    (``encoder.text_encoder.layers.N.self_attn``) is encoder_self and the decoder's attention over
    its first input, the source sentence (``decoder.layers.N.cross_attention.attentions.0``),
    encoder_decoder; its attentions over the other inputs and over their contexts are other."""
    if name.startswith("decoder.") and name.endswith(("encoder_attn", "cross_attention.attentions.0")):
        return "encoder_decoder"
    if name.startswith("decoder.") and name.endswith("self_attn"):
        return "decoder_self"
    if ENCODER_LAYERS.match(name) and name.endswith("self_attn"):
        return "encoder_self"
    return "other"


@dataclass
class HeadRecord:
    """One attention call: head outputs (T, B, H, d_head), its query padding mask (B, T) or None,
    and (optionally) the value vectors (S, B, H·d_head) with their key padding mask."""
    heads: Tensor
    query_padding_mask: Optional[Tensor]
    values: Optional[Tensor] = None
    key_padding_mask: Optional[Tensor] = None


class _FusedPathSwitch:
    def __init__(self, modules: Sequence[MultiheadAttention]):
        self.saved = [(m, m.skip_embed_dim_check) for m in modules]
        for m in modules:
            m.skip_embed_dim_check = True

    def restore(self) -> None:
        for m, value in self.saved:
            m.skip_embed_dim_check = value


class HeadTap:
    """Records the first call of each selected attention module after :meth:`reset`.

    "First call" matters for HCE/HMCE, whose shared encoder layers also run on the context
    sentences after the source: the source call is the one recorded. The query padding mask is
    the module's own key padding mask for self-attention, else the mask given to
    :meth:`reset` whose shape matches (decoder modules prefer the target mask).
    """

    def __init__(self, model: nn.Module, patterns: Sequence[str] = ("*",), capture_values: bool = False):
        self.modules = attention_modules(model, patterns)
        self.capture_values = capture_values
        self.records: Dict[str, HeadRecord] = {}
        self._pending: Dict[str, dict] = {}
        self._masks: List[Tensor] = []
        self._target_mask: Optional[Tensor] = None
        self._switch = _FusedPathSwitch(list(self.modules.values()))
        self._handles = []
        for name, module in self.modules.items():
            self._handles.append(module.register_forward_pre_hook(self._on_call(name), with_kwargs=True))
            self._handles.append(module.out_proj.register_forward_pre_hook(self._on_heads(name, module)))
            if capture_values:
                self._handles.append(module.v_proj.register_forward_hook(self._on_values(name)))

    def reset(self, source_mask: Optional[Tensor] = None, target_mask: Optional[Tensor] = None) -> None:
        self.records, self._pending = {}, {}
        self._masks = [m for m in (source_mask, target_mask) if m is not None]
        self._target_mask = target_mask

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._switch.restore()

    def _query_mask(self, name: str, module: MultiheadAttention, query: Tensor, key_padding_mask) -> Optional[Tensor]:
        shape = (query.size(1), query.size(0))
        if module.self_attention and key_padding_mask is not None and tuple(key_padding_mask.shape) == shape:
            return key_padding_mask.bool()
        candidates = list(self._masks)
        if name.startswith("decoder.") and self._target_mask is not None:
            candidates.insert(0, self._target_mask)
        for mask in candidates:
            if tuple(mask.shape) == shape:
                return mask
        return None

    def _on_call(self, name: str):
        module = self.modules[name]

        def hook(_module, args, kwargs):
            if name in self.records or name in self._pending:
                return None
            query = kwargs["query"] if "query" in kwargs else args[0]
            key_padding_mask = kwargs.get("key_padding_mask", args[3] if len(args) > 3 else None)
            self._pending[name] = {
                "query_padding_mask": self._query_mask(name, module, query, key_padding_mask),
                "key_padding_mask": None if key_padding_mask is None else key_padding_mask.bool(),
            }
            return None

        return hook

    def _on_values(self, name: str):
        def hook(_module, _inputs, output):
            pending = self._pending.get(name)
            if pending is not None and "values" not in pending:
                pending["values"] = output
        return hook

    def _on_heads(self, name: str, module: MultiheadAttention):
        def hook(_module, inputs):
            pending = self._pending.pop(name, None)
            if pending is None:
                return None
            x = inputs[0]
            heads = x.view(x.size(0), x.size(1), module.num_heads, module.head_dim)
            self.records[name] = HeadRecord(heads=heads, **pending)
            return None

        return hook


class DropHead:
    """Drophead (Zhou et al. 2020; Yun 2022 §4.3): in training, zero each head's output per
    example with probability ``p`` and rescale the kept heads by 1/(1−p), like dropout.
    Applied as a forward pre-hook on ``out_proj`` of every selected attention module."""

    def __init__(self, model: nn.Module, p: float, patterns: Sequence[str] = ("*",)):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"--drophead must be in [0, 1), got {p}")
        self.p = p
        self.modules = attention_modules(model, patterns)
        self._switch = _FusedPathSwitch(list(self.modules.values()))
        self._handles = [m.out_proj.register_forward_pre_hook(self._hook(m)) for m in self.modules.values()]

    def _hook(self, module: MultiheadAttention) -> Callable:
        def hook(_module, inputs):
            if not module.training or self.p == 0.0:
                return None
            x = inputs[0]
            time, batch = x.size(0), x.size(1)
            keep = torch.empty(1, batch, module.num_heads, 1, device=x.device, dtype=x.dtype).bernoulli_(1 - self.p)
            dropped = x.view(time, batch, module.num_heads, module.head_dim) * keep / (1 - self.p)
            return (dropped.view_as(x),) + tuple(inputs[1:])

        return hook

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._switch.restore()
