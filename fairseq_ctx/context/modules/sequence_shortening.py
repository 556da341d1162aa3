"""Sequence shortening of a cached context sentence (Mąka et al., 2024)."""
from typing import Tuple

import torch
from fairseq.modules import LayerNorm, MultiheadAttention, SinusoidalPositionalEmbedding
from torch import Tensor, nn

from fairseq_ctx.context.modules.sparsemax import sparsemax

POOLINGS = ("mean_pooling", "max_pooling", "linear_pooling")
METHODS = (*POOLINGS, "grouping", "selecting")
MASKED_SCORE = -1e9  # a padding token's score before selecting: no weight, finite for sparsemax's sums


class SequenceShortening(nn.Module):
    """Sequence shortening of Mąka et al. (2024, "Sequence Shortening for Context-aware Machine
    Translation", Findings of EACL): the token states H (L, C) of a context sentence become fewer
    vectors P before they are cached.

    - ``mean_pooling`` / ``max_pooling`` / ``linear_pooling``: windows of ``size`` consecutive
      tokens, averaged (over their real tokens), max-pooled, or concatenated (padding as zeros)
      and projected, W·[h_1; …; h_size] + b; ceil(L / size) vectors, a window of padding only masked;
    - ``grouping`` (Latent Grouping): every token spreads over ``size`` groups, G = softmax over
      the groups of W·h_t + b, and P = Gᵀ H (size vectors);
    - ``selecting`` (Latent Selecting): every group picks its tokens, S = softmax over the tokens
      of W·h_t + b, and P = Sᵀ H (size vectors);
    - with ``sparsemax``, grouping and selecting normalise with sparsemax instead of softmax
      (the paper's sparse variant: a token joins few groups, a group selects few tokens).

    Then each vector gets the sinusoidal position of its index, attends the sentence's tokens
    (multi-head attention, key padding masked) and P ← LayerNorm(P + Attn(P, H, H)). Padding
    tokens weigh nothing in every method, so the output does not depend on the padding."""

    def __init__(self, method: str, size: int, embed_dim: int, heads: int, attention_dropout: float,
                 sparsemax: bool = False):
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"--shortening must be one of {', '.join(METHODS)}, got {method!r}")
        if size < 1:
            raise ValueError(f"--shortening-size must be >= 1, got {size}")
        if sparsemax and method in POOLINGS:
            raise ValueError(f"--shortening-sparsemax normalises grouping or selecting; {method} has no weights")
        self.method, self.size, self.sparsemax = method, size, sparsemax
        self.scores = nn.Linear(embed_dim, size) if method in ("grouping", "selecting") else None
        self.window_projection = nn.Linear(size * embed_dim, embed_dim) if method == "linear_pooling" else None
        self.attention = MultiheadAttention(embed_dim, heads, dropout=attention_dropout, encoder_decoder_attention=True)
        self.layer_norm = LayerNorm(embed_dim)
        self.register_buffer("positions", SinusoidalPositionalEmbedding.get_embedding(size + 1, embed_dim, 0)[1:],
                             persistent=False)

    def forward(self, states: Tensor, padding: Tensor) -> Tuple[Tensor, Tensor]:
        """states (U, L, C) with padding (U, L) → shortened (U, K, C) with padding (U, K)."""
        keep = (~padding).unsqueeze(-1).type_as(states)
        if self.scores is None:
            pooled, pooled_padding = self.pool(states * keep, padding)
        else:
            scores = self.scores(states).float()
            normalise = sparsemax if self.sparsemax else torch.softmax
            if self.method == "grouping":
                weights = normalise(scores, dim=-1) * keep
            else:
                weights = normalise(scores.masked_fill(padding.unsqueeze(-1), MASKED_SCORE), dim=1)
            pooled = torch.einsum("ulk,ulc->ukc", weights.type_as(states), states * keep)
            pooled_padding = padding.all(dim=1, keepdim=True).expand(-1, self.size)
        pooled = pooled + self.position_table(pooled.size(1)).to(pooled).unsqueeze(0)
        query, memory = pooled.transpose(0, 1), states.transpose(0, 1)
        attended, _ = self.attention(query=query, key=memory, value=memory, key_padding_mask=padding, need_weights=False)
        return self.layer_norm(pooled + attended.transpose(0, 1)), pooled_padding

    def pool(self, states: Tensor, padding: Tensor) -> Tuple[Tensor, Tensor]:
        """Windows of ``size`` tokens (states already zero at padding)."""
        sentences, length, dim = states.shape
        windows = -(-length // self.size)
        extra = windows * self.size - length
        states = torch.cat([states, states.new_zeros(sentences, extra, dim)], dim=1).view(sentences, windows, self.size, dim)
        padding = torch.cat([padding, padding.new_ones(sentences, extra)], dim=1).view(sentences, windows, self.size)
        window_padding = padding.all(dim=-1)
        if self.method == "mean_pooling":
            count = (~padding).sum(dim=-1, keepdim=True).clamp(min=1).type_as(states)
            pooled = states.sum(dim=2) / count
        elif self.method == "linear_pooling":
            pooled = self.window_projection(states.reshape(sentences, windows, self.size * dim))
            pooled = pooled.masked_fill(window_padding.unsqueeze(-1), 0.0)
        else:
            pooled = states.masked_fill(padding.unsqueeze(-1), torch.finfo(states.dtype).min).amax(dim=2)
            pooled = pooled.masked_fill(window_padding.unsqueeze(-1), 0.0)
        return pooled, window_padding

    def position_table(self, count: int) -> Tensor:
        """Sinusoidal positions 1..count (grown on demand: pooling yields as many as a sentence has windows)."""
        if count > self.positions.size(0):
            self.positions = SinusoidalPositionalEmbedding.get_embedding(count + 1, self.positions.size(1), 0)[1:].to(
                self.positions)
        return self.positions[:count]
