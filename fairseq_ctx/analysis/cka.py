"""HSIC and CKA as differentiable torch quantities (Yun 2022, eq. 4.4–4.6, 5.1–5.3), the SRIP
spectral term (eq. 4.8) and helpers that sample vectors from padded (B, T, d) tensors.

Conventions
-----------
- Rows are examples: ``x`` is (n, d1), ``y`` is (n, d2), row i of x pairs with row i of y.
- Arithmetic runs in float32 whatever the input dtype (float16/bfloat16 inputs are upcast, and
  autocast is off inside: under ``--amp`` the products stay float32);
  ``dtype=torch.float64`` asks for float64; ``dtype=None`` means float64 if an input is float64,
  else float32. Results are 0-d tensors of that dtype.
- Biased HSIC (Yun, 2022, ch. 4): tr(K C L C) / (n−1)². Unbiased HSIC: Song et al. (2012), eq. 5, needs
  n >= 4 and always works on Gram matrices.
- Linear kernel, biased: computed in feature space (‖Ycᵀ Xc‖_F², O(n·d1·d2)) when both
  dimensions are below n, in Gram space (O(n²·d)) otherwise; both give the same number.
- RBF kernel: k(a, b) = exp(−‖a−b‖² / (2σ²)) with σ = ``rbf_bandwidth`` × the median of the
  non-zero pairwise distances of that representation (Kornblith et al. 2019); σ is treated as a
  constant for gradients (``rbf_sigma`` fixes σ directly).
- Padding masks are True at padding positions (fairseq's convention).
- Degenerate inputs: HSIC needs ``hsic_min_rows`` rows (a single row has no pair to compare;
  the biased estimator would be 0/0), so callers with fewer skip the term. CKA is 0, with
  zero gradients, when the rows of a side are all equal (up to rounding): its HSIC(K, K) is 0.
"""
import logging
from typing import Optional, Set, Tuple

import torch
from torch import Tensor

from fairseq_ctx.core.float32_statistics import without_autocast

logger = logging.getLogger(__name__)

KERNELS = ("linear", "rbf")
_warned: Set[str] = set()


def _compute_dtype(dtype: Optional[torch.dtype], *tensors: Tensor) -> torch.dtype:
    if dtype is not None:
        return dtype
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def hsic_min_rows(unbiased: bool = False) -> int:
    """Fewest paired rows HSIC/CKA are defined for: 2 (biased), 4 (unbiased, Song et al. 2012)."""
    return 4 if unbiased else 2


def _check_pair(x: Tensor, y: Tensor, kernel: str) -> None:
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(f"hsic/cka expect 2-d (n, d) inputs, got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if x.size(0) != y.size(0):
        raise ValueError(f"hsic/cka need the same number of rows (paired examples), got {x.size(0)} and {y.size(0)}")
    if x.size(0) < hsic_min_rows():
        raise ValueError(f"hsic/cka need at least 2 rows, got {x.size(0)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")


def gram(x: Tensor, kernel: str = "linear", rbf_bandwidth: float = 1.0, rbf_sigma: Optional[float] = None) -> Tensor:
    """Kernel matrix K = κ(X, X) of the rows of x (n, d); ``rbf_sigma`` fixes σ instead of the median rule."""
    if kernel == "linear":
        return x @ x.t()
    sq_norms = (x * x).sum(dim=1)
    sq_dist = (sq_norms.unsqueeze(1) + sq_norms.unsqueeze(0) - 2 * x @ x.t()).clamp_min(0)
    if rbf_sigma is not None:
        return torch.exp(-sq_dist / (2 * rbf_sigma * rbf_sigma))
    with torch.no_grad():
        off_diag = sq_dist[~torch.eye(x.size(0), dtype=torch.bool, device=x.device)]
        positive = off_diag[off_diag > 0]
        median = positive.sqrt().median() if positive.numel() else torch.ones((), dtype=x.dtype, device=x.device)
        sigma = rbf_bandwidth * median
    return torch.exp(-sq_dist / (2 * sigma * sigma))


def _center_gram(k: Tensor) -> Tensor:
    return k - k.mean(dim=0, keepdim=True) - k.mean(dim=1, keepdim=True) + k.mean()


def _hsic_biased_gram(k: Tensor, l: Tensor) -> Tensor:
    n = k.size(0)
    return (_center_gram(k) * l).sum() / (n - 1) ** 2


def _hsic_unbiased_gram(k: Tensor, l: Tensor) -> Tensor:
    n = k.size(0)
    if n < 4:
        raise ValueError(f"unbiased HSIC needs at least 4 rows, got {n}")
    eye = torch.eye(n, dtype=torch.bool, device=k.device)
    k = k.masked_fill(eye, 0)
    l = l.masked_fill(eye, 0)
    ones_k, ones_l = k.sum(dim=0), l.sum(dim=0)
    trace_kl = (k * l).sum()
    term2 = ones_k.sum() * ones_l.sum() / ((n - 1) * (n - 2))
    term3 = 2 * (ones_k * ones_l).sum() / (n - 2)
    return (trace_kl + term2 - term3) / (n * (n - 3))


def _paired_inputs(x: Tensor, y: Tensor, kernel: str, dtype: Optional[torch.dtype]) -> Tuple[Tensor, Tensor]:
    """The checked pair, both in the compute dtype (module docstring: float32 unless float64)."""
    _check_pair(x, y, kernel)
    compute = _compute_dtype(dtype, x, y)
    return x.to(compute), y.to(compute)


def _use_feature_space(x: Tensor, y: Tensor, kernel: str, unbiased: bool) -> bool:
    return kernel == "linear" and not unbiased and max(x.size(1), y.size(1)) < x.size(0)


@without_autocast
def hsic(
    x: Tensor,
    y: Tensor,
    kernel: str = "linear",
    unbiased: bool = False,
    rbf_bandwidth: float = 1.0,
    dtype: Optional[torch.dtype] = None,
    rbf_sigma: Optional[float] = None,
) -> Tensor:
    """HSIC(K, L) between paired rows of x (n, d1) and y (n, d2) (eq. 4.4 / Song et al. 2012)."""
    x, y = _paired_inputs(x, y, kernel, dtype)
    if _use_feature_space(x, y, kernel, unbiased):
        xc, yc = x - x.mean(dim=0), y - y.mean(dim=0)
        return (yc.t() @ xc).pow(2).sum() / (x.size(0) - 1) ** 2
    k, l = gram(x, kernel, rbf_bandwidth, rbf_sigma), gram(y, kernel, rbf_bandwidth, rbf_sigma)
    return _hsic_unbiased_gram(k, l) if unbiased else _hsic_biased_gram(k, l)


@without_autocast
def cka(
    x: Tensor,
    y: Tensor,
    kernel: str = "linear",
    unbiased: bool = False,
    rbf_bandwidth: float = 1.0,
    dtype: Optional[torch.dtype] = None,
    rbf_sigma: Optional[float] = None,
) -> Tensor:
    """CKA = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L)) (eq. 4.5 / 5.3); 0 when a side is constant."""
    x, y = _paired_inputs(x, y, kernel, dtype)
    if _rows_all_equal(x) or _rows_all_equal(y):
        return (x.sum() + y.sum()) * 0.0
    tiny = torch.finfo(x.dtype).tiny
    if _use_feature_space(x, y, kernel, unbiased):
        xc, yc = x - x.mean(dim=0), y - y.mean(dim=0)
        cross = (yc.t() @ xc).pow(2).sum()
        norm_x = (xc.t() @ xc).pow(2).sum().sqrt()
        norm_y = (yc.t() @ yc).pow(2).sum().sqrt()
        return cross / (norm_x * norm_y).clamp_min(tiny)
    k, l = gram(x, kernel, rbf_bandwidth, rbf_sigma), gram(y, kernel, rbf_bandwidth, rbf_sigma)
    estimator = _hsic_unbiased_gram if unbiased else _hsic_biased_gram
    kl, kk, ll = estimator(k, l), estimator(k, k), estimator(l, l)
    return kl / (kk * ll).clamp_min(tiny).sqrt()


def _rows_all_equal(x: Tensor) -> bool:
    """True when every row of x (n, d) equals their mean up to the rounding of that mean: the
    representation is constant, HSIC(K, K) is 0 and CKA's denominator would be rounding noise."""
    spread = (x - x.mean(dim=0)).abs().max()
    return bool(spread <= x.size(0) * torch.finfo(x.dtype).eps * x.abs().max())


def _centered_heads(heads: Tensor, dtype: Optional[torch.dtype]) -> Tensor:
    if heads.dim() != 3 or heads.size(1) < 2:
        raise ValueError(f"expected head outputs of shape (n, H>=2, d_head), got {tuple(heads.shape)}")
    if heads.size(0) < hsic_min_rows():
        raise ValueError(f"head HSIC needs at least 2 rows (positions), got {heads.size(0)}; "
                         f"skip the term for such a batch")
    heads = heads.to(_compute_dtype(dtype, heads))
    return heads - heads.mean(dim=0, keepdim=True)


@without_autocast
def pairwise_linear_hsic(heads: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
    """(H, H) matrix of biased linear HSIC between the heads of ``heads`` (n, H, d_head)."""
    centered = _centered_heads(heads, dtype)
    cross = torch.einsum("nhd,nge->hgde", centered, centered)
    return cross.pow(2).sum(dim=(2, 3)) / (heads.size(0) - 1) ** 2


@without_autocast
def mean_pairwise_linear_hsic(heads: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
    """Mean over head pairs i < j of biased linear HSIC (the HSIC regularizer, eq. 4.7).

    Equals ``mean_off_diagonal(pairwise_linear_hsic(heads))`` but computes only the H(H−1)/2
    cross-covariance blocks it needs (one batched matmul), not all H² of them.
    """
    centered = _centered_heads(heads, dtype)
    h = centered.size(1)
    first, second = torch.triu_indices(h, h, offset=1, device=centered.device)
    cross = torch.bmm(centered[:, first].permute(1, 2, 0), centered[:, second].permute(1, 0, 2))
    return cross.pow(2).sum(dim=(1, 2)).mean() / (heads.size(0) - 1) ** 2


def pairwise_linear_cka(heads: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
    """(H, H) matrix of linear CKA between heads (eq. 4.6 before averaging); diagonal is 1."""
    h = pairwise_linear_hsic(heads, dtype)
    norms = h.diagonal().clamp_min(torch.finfo(h.dtype).tiny).sqrt()
    return h / (norms.unsqueeze(0) * norms.unsqueeze(1))


def mean_off_diagonal(matrix: Tensor) -> Tensor:
    """Mean over the pairs i < j of a symmetric (H, H) matrix."""
    h = matrix.size(0)
    upper = torch.triu(torch.ones(h, h, dtype=torch.bool, device=matrix.device), diagonal=1)
    return matrix[upper].mean()


@without_autocast
def srip(matrix: Tensor, iterations: int = 5, dtype: Optional[torch.dtype] = None) -> Tensor:
    """σ_max(MᵀM − I) by power iteration (Bansal et al. 2018; eq. 4.8 with M = V_all).

    The iterations run without gradient; the returned norm ‖(MᵀM − I)u‖ is differentiable in M.
    (MᵀM − I)u is computed as Mᵀ(Mu) − u, never forming the (d, d) matrix.
    """
    m = matrix.to(_compute_dtype(dtype, matrix))

    def apply(u: Tensor) -> Tensor:
        return m.t() @ (m @ u) - u

    generator = torch.Generator().manual_seed(0)
    u = torch.randn(m.size(1), generator=generator, dtype=m.dtype).to(m.device)
    tiny = torch.finfo(m.dtype).tiny
    with torch.no_grad():
        for _ in range(iterations):
            v = apply(u)
            u = v / v.norm().clamp_min(tiny)
    return apply(u / u.norm().clamp_min(tiny)).norm()


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message)


def valid_positions(padding_mask: Tensor) -> Tensor:
    """(m, 2) indices (batch, time) of the non-padding positions of a (B, T) mask."""
    return (~padding_mask).nonzero(as_tuple=False)


def _sample_count(available: int, n: int, what: str) -> int:
    if n > available > 0:
        warn_once(f"sample:{what}", f"asked for {n} sampled vectors of {what} but only {available} non-padding "
                                    f"vectors are available; using all {available} (warned once)")
    return min(n, available)


def sample_rows(
    states: Tensor, padding_mask: Optional[Tensor], n: int, generator: Optional[torch.Generator] = None,
    what: str = "representation",
) -> Tensor:
    """n distinct non-padding vectors of ``states`` (B, T, d); all of them if fewer exist (warned once),
    so none, a (0, d) tensor, when every position is padding."""
    if padding_mask is None:
        padding_mask = states.new_zeros(states.shape[:2], dtype=torch.bool)
    positions = valid_positions(padding_mask)
    count = _sample_count(positions.size(0), n, what)
    chosen = positions[torch.randperm(positions.size(0), generator=generator)[:count].to(positions.device)]
    return states[chosen[:, 0], chosen[:, 1]]


def sample_paired_rows(
    a: Tensor, a_mask: Optional[Tensor], b: Tensor, b_mask: Optional[Tensor], n: int,
    generator: Optional[torch.Generator] = None, what: str = "representations",
) -> Tuple[Tensor, Tensor]:
    """n pairs (a_i, b_i) from the same example: distinct non-padding positions of ``a`` (B, Ta, da),
    each paired with a random non-padding position of ``b`` (B, Tb, db) in the same example.
    Examples where ``b`` has no valid position are skipped; no pairs, (0, da) and (0, db), when
    no example has valid positions on both sides (e.g. a batch without context)."""
    if a.size(0) != b.size(0):
        raise ValueError(f"paired sampling needs the same batch size, got {a.size(0)} and {b.size(0)}")
    a_mask = a.new_zeros(a.shape[:2], dtype=torch.bool) if a_mask is None else a_mask
    b_mask = b.new_zeros(b.shape[:2], dtype=torch.bool) if b_mask is None else b_mask
    b_valid = ~b_mask
    usable = a_mask | ~b_valid.any(dim=1, keepdim=True)
    positions = valid_positions(usable)
    count = _sample_count(positions.size(0), n, what)
    if count == 0:
        return a[:0, 0], b[:0, 0]
    chosen = positions[torch.randperm(positions.size(0), generator=generator)[:count].to(positions.device)]
    rows = chosen[:, 0]
    weights = b_valid[rows].float()
    b_time = torch.multinomial(weights.cpu(), 1, generator=generator).squeeze(1).to(rows.device)
    return a[rows, chosen[:, 1]], b[rows, b_time]
