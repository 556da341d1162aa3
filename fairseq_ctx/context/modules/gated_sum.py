"""Gated sum of two aligned representations."""
import torch
from torch import Tensor, nn


class GatedSum(nn.Module):
    """Gated sum of DAT/HCE (Yun 2022, eq. 3.8): g = σ(W[a; b] + b_g), out = g ⊙ a + (1 − g) ⊙ b."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.gate = nn.Linear(2 * embed_dim, embed_dim)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        g = torch.sigmoid(self.gate(torch.cat([a, b], dim=-1)))
        return g * a + (1 - g) * b
