"""How much of the source encoding comes from the context through the gated sum of DAT and
HCE/HMCE (Yun 2022, eq. 3.8: out = g ⊙ h_src + (1 − g) ⊙ h_ctx), read per sentence with context:
``gate``, the mean over its tokens and channels of 1 − g (the weight the context's side receives),
and ``contribution``, the mean over its tokens of ‖(1 − g) ⊙ h_ctx‖ / ‖out‖ (the share of the
output vector's length that the context's side makes, which also counts how large h_ctx is). A
model that ignores its context drives both to 0."""
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from fairseq_ctx.context.contrastive.example import ContrastiveExample
from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.modules.gated_sum import GatedSum


@dataclass
class GateReading:
    """The context's side of one sentence's gated sum (see the module's description)."""

    gate: float
    contribution: float


def context_gate_readings(translator, examples: Sequence[ContrastiveExample],
                          batch_size: int = 32) -> List[Optional[GateReading]]:
    """Per example, its :class:`GateReading` over the source tokens (None for an example without
    context, whose encoding skips the gate); ``translator`` a hub ``DocumentTranslator`` of a model
    with one gated sum (DAT, HCE, HMCE)."""
    from fairseq_ctx.context.hub import Example

    model = translator.models[0]
    gates = [module for module in model.modules() if isinstance(module, GatedSum)]
    if len(gates) != 1:
        raise ValueError(f"{type(model).__name__} has {len(gates)} gated sums; the context gate is read from models "
                         f"with one (dat, hce, hmce)")
    captured: List[tuple] = []
    handle = gates[0].register_forward_hook(lambda _module, inputs, out: captured.append((*inputs, out)))
    readings: List[Optional[GateReading]] = []
    try:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start:start + batch_size]
            sample = translator.make_sample([Example(translator.encode_source(e.source),
                                                     [translator.encode_source(c) for c in e.source_context])
                                             for e in chunk])
            captured.clear()
            net_input = sample["net_input"]
            with torch.no_grad():
                encoded = model.encoder.forward_with_context(net_input["src_tokens"], net_input["src_lengths"],
                                                             ContextInputs.of(net_input))
                h_src, h_ctx, out = (t.float() for t in captured[0])  # (T, B, C)
                share = 1 - torch.sigmoid(gates[0].gate.float()(torch.cat([h_src, h_ctx], dim=-1)))
            real = ~encoded["encoder_padding_mask"][0].t()  # (T, B)
            tokens = real.sum(dim=0)
            gate = (share.mean(dim=-1) * real).sum(dim=0) / tokens
            length = ((share * h_ctx).norm(dim=-1) / out.norm(dim=-1).clamp_min(1e-12) * real).sum(dim=0) / tokens
            by_row = {row: GateReading(g, c) for row, g, c in zip(sample["id"].tolist(), gate.tolist(), length.tolist())}
            readings += [by_row[row] if e.source_context else None for row, e in enumerate(chunk)]
    finally:
        handle.remove()
    return readings
