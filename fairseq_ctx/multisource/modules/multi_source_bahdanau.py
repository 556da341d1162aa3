"""Bahdanau attention over several inputs for the RNN decoder (Libovický 2019 §5.1,
eq. 5.1–5.11): context-vector concatenation, flat and hierarchical combination, sentinel gate."""
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

RNN_COMBINATIONS = ("concat", "flat", "hierarchical")


class MultiSourceBahdanauAttention(nn.Module):
    """e_ij^(k) = v_aᵀ tanh(W_a s_i + U_a^(k) h_j^(k) + b_a) + b_e (eq. 5.1), then

    - concat: one softmax per input, c_i = W_cat [c_i^(1); …; c_i^(n)] (the concatenated
      context vectors, projected to ``context_dim`` so the decoder size does not depend on n);
    - flat (eq. 5.8): one softmax over all inputs' states, c_i = Σ_k Σ_j α_ij^(k) (U_c^(k) h_j^(k) + b_c^(k));
    - hierarchical (eq. 5.9–5.11): c_i^(k) per input, β_i = softmax_k(v_bᵀ tanh(W_b s_i +
      U_b^(k) c_i^(k) + b_b^(k))), c_i = Σ_k β_i^(k) (U_c^(k) c_i^(k) + b_c^(k)).

    Sentinel (eq. 5.4–5.5, flat/hierarchical): ψ_i = σ(W_y y_i + W_s s_{i-1}); the vector ψ_i ⊙ s_i
    is one more input the decoder may attend to instead of the real ones. The last element of
    ``input_weights`` is then the sentinel's share.
    """

    def __init__(self, query_dim: int, input_dims: List[int], attention_dim: int, context_dim: int,
                 combination: str, sentinel: bool, embed_dim: int):
        super().__init__()
        if combination not in RNN_COMBINATIONS:
            raise ValueError(f"--combination must be one of {RNN_COMBINATIONS} for multisource_rnn, got '{combination}'")
        if sentinel and combination == "concat":
            raise ValueError("--sentinel needs --combination flat or hierarchical")
        self.combination = combination
        self.sentinel = sentinel
        dims = list(input_dims) + ([query_dim] if sentinel else [])
        self.query_proj = nn.Linear(query_dim, attention_dim, bias=False)  # W_a (shared)
        keyed = dims if combination == "flat" else list(input_dims)  # the sentinel is one state: no α over it
        self.state_proj = nn.ModuleList(nn.Linear(d, attention_dim) for d in keyed)  # U_a^(k), b_a
        self.energy = nn.Linear(attention_dim, 1)  # v_a, b_e
        if combination == "concat":
            self.output = nn.Linear(sum(input_dims), context_dim)
        else:
            self.context_proj = nn.ModuleList(nn.Linear(d, context_dim) for d in dims)  # U_c^(k), b_c^(k)
        if combination == "hierarchical":
            self.input_query_proj = nn.Linear(query_dim, attention_dim, bias=False)  # W_b
            self.input_context_proj = nn.ModuleList(nn.Linear(d, attention_dim) for d in dims)  # U_b^(k), b_b^(k)
            self.input_energy = nn.Linear(attention_dim, 1, bias=False)  # v_b
        if sentinel:
            self.gate_input = nn.Linear(embed_dim, query_dim)  # W_y
            self.gate_state = nn.Linear(query_dim, query_dim, bias=False)  # W_s

    def precompute(self, states: List[Tensor]) -> List[Tensor]:
        """U_a^(k) h^(k) for every input state, once per sentence: (B, S_k, attention_dim)."""
        return [proj(h) for proj, h in zip(self.state_proj, states)]  # zip stops before a sentinel's U_a

    def _energies(self, query: Tensor, keys: Tensor, mask: Optional[Tensor]) -> Tensor:
        energies = self.energy(torch.tanh(self.query_proj(query).unsqueeze(1) + keys)).squeeze(-1).float()
        if mask is not None:
            energies = energies.masked_fill(mask, torch.finfo(energies.dtype).min)
        return energies

    def forward(self, query: Tensor, states: List[Tensor], keys: List[Tensor], masks: List[Optional[Tensor]],
                prev_embed: Tensor, prev_state: Tensor) -> Tuple[Tensor, Tensor]:
        """query s_i (B, Q); states/keys/masks per input (B, S_k, ·). Returns the context
        (B, context_dim) and input weights (B, n[+1]) (for concat: uniform)."""
        sentinel = None
        if self.sentinel:
            gate = torch.sigmoid(self.gate_input(prev_embed) + self.gate_state(prev_state))
            sentinel = gate * query
        if self.combination == "flat":
            if sentinel is not None:
                states = states + [sentinel.unsqueeze(1)]
                keys = keys + [self.state_proj[-1](sentinel.unsqueeze(1))]
                masks = masks + [None]
            energies = torch.cat([self._energies(query, k, m) for k, m in zip(keys, masks)], 1)
            alpha = torch.softmax(energies, -1).to(query.dtype)
            projected = torch.cat([proj(h) for proj, h in zip(self.context_proj, states)], 1)
            context = torch.bmm(alpha.unsqueeze(1), projected).squeeze(1)
            sizes = [h.size(1) for h in states]
            return context, torch.stack([a.sum(-1) for a in alpha.float().split(sizes, -1)], -1)
        contexts = []
        for k, h, m in zip(keys, states, masks):
            alpha = torch.softmax(self._energies(query, k, m), -1).to(query.dtype)
            contexts.append(torch.bmm(alpha.unsqueeze(1), h).squeeze(1))
        if sentinel is not None:
            contexts.append(sentinel)
        if self.combination == "concat":
            uniform = query.new_full((query.size(0), len(contexts)), 1.0 / len(contexts)).float()
            return self.output(torch.cat(contexts, -1)), uniform
        input_query = self.input_query_proj(query)
        energies = torch.stack([self.input_energy(torch.tanh(input_query + proj(c))).squeeze(-1)
                                for proj, c in zip(self.input_context_proj, contexts)], -1).float()
        beta = torch.softmax(energies, -1)
        projected = torch.stack([proj(c) for proj, c in zip(self.context_proj, contexts)], 1)
        return (beta.to(query.dtype).unsqueeze(-1) * projected).sum(1), beta
