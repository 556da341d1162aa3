"""Sparsemax (Martins and Astudillo, 2016, "From Softmax to Sparsemax", ICML, eq. 2 and Alg. 1)."""
import torch
from torch import Tensor


def sparsemax(scores: Tensor, dim: int = -1) -> Tensor:
    """The Euclidean projection of ``scores`` onto the probability simplex along ``dim``:
    p_i = max(z_i - τ(z), 0) with τ chosen so that the p_i sum to 1. With z sorted in decreasing
    order, the support holds the k largest for the largest k with 1 + k·z_(k) > Σ_{j≤k} z_(j),
    and τ = (Σ_{j≤k} z_(j) - 1) / k. Unlike softmax, scores below τ get exactly zero. Autograd
    through τ gives the paper's Jacobian diag(s) - s sᵀ / |S| (s: the support's indicator)."""
    z = scores.transpose(dim, -1)
    ordered = z.sort(dim=-1, descending=True).values
    rank = torch.arange(1, z.size(-1) + 1, device=z.device, dtype=z.dtype)
    cumulative = ordered.cumsum(dim=-1)
    support = (1 + rank * ordered > cumulative).sum(dim=-1, keepdim=True)
    threshold = (cumulative.gather(-1, support - 1) - 1) / support.to(z.dtype)
    return torch.clamp(z - threshold, min=0).transpose(dim, -1)
