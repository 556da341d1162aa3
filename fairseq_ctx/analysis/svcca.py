"""SVCCA similarity (Raghu et al. 2017; Yun 2022 eq. 4.3), analysis only, in float64 NumPy."""
from typing import Tuple

import numpy as np


def _reduce(x: np.ndarray, variance: float) -> np.ndarray:
    """Centre, SVD, keep the top directions covering ``variance`` of the total variance."""
    x = x - x.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    energy = s**2
    if energy.sum() == 0:
        return x[:, :0]
    keep = int(np.searchsorted(np.cumsum(energy) / energy.sum(), variance) + 1)
    return u[:, :keep] * s[:keep]


def svcca(x: np.ndarray, y: np.ndarray, variance: float = 0.99) -> Tuple[float, np.ndarray]:
    """Mean SVCCA coefficient of x (n, d1) and y (n, d2), and all coefficients (descending).

    CCA is computed as the singular values of Q_xᵀ Q_y, Q the orthonormal bases (QR) of the
    SVD-reduced representations. Needs n larger than the kept dimensions.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"svcca needs paired rows, got {x.shape[0]} and {y.shape[0]}")
    rx, ry = _reduce(x, variance), _reduce(y, variance)
    if rx.shape[1] == 0 or ry.shape[1] == 0:
        return 0.0, np.zeros(0)
    if x.shape[0] <= max(rx.shape[1], ry.shape[1]):
        raise ValueError(f"svcca needs more rows ({x.shape[0]}) than kept directions "
                         f"({rx.shape[1]}, {ry.shape[1]}); collect more tokens")
    qx, _ = np.linalg.qr(rx)
    qy, _ = np.linalg.qr(ry)
    coefficients = np.clip(np.linalg.svd(qx.T @ qy, compute_uv=False), 0.0, 1.0)
    return float(coefficients.mean()), coefficients
