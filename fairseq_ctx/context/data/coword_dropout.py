"""CoWord dropout (Fernandes et al., 2021, "context-aware word dropout"): in training, each
token of the current source sentence is replaced by a placeholder with probability p, so that
translating it takes more of the context, which is left whole."""
from typing import Dict, Sequence

import torch


def coword_dropout(sample: Dict, p: float, placeholder: int, kept: Sequence[int]) -> Dict:
    """``sample`` with every token of ``net_input["src_tokens"]`` but those in ``kept`` (padding,
    end of sentence) replaced by ``placeholder`` with probability ``p``, drawn from torch's
    generator (fairseq seeds it per update); ``sample`` itself when p is 0.

    The context entries are kept, except ``context_source_row``, which becomes -1 everywhere: no
    source row holds a context sentence as it is any more, so HCE/HMCE encode every context
    sentence from ``context_tokens`` instead of reusing a (masked) source encoding."""
    if p == 0:
        return sample
    net_input = sample["net_input"]
    tokens = net_input["src_tokens"]
    maskable = torch.ones_like(tokens, dtype=torch.bool)
    for index in kept:
        maskable &= tokens.ne(index)
    drop = maskable & torch.rand(tokens.shape, device=tokens.device).lt(p)
    masked = {**net_input, "src_tokens": tokens.masked_fill(drop, placeholder)}
    if net_input.get("context_source_row") is not None:
        masked["context_source_row"] = torch.full_like(net_input["context_source_row"], -1)
    return {**sample, "net_input": masked}
