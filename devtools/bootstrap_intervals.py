"""Percentile bootstrap intervals (Efron & Tibshirani, 1993) of an accuracy over examples and of
the paired difference of two systems' accuracies on the same examples (Koehn (2004)'s resampling
of test examples), as the recipes' results report them."""
from typing import Dict, Sequence

import numpy as np

RESAMPLES = 2000
SEED = 12345  # fixed: the same outcomes always give the same interval


def accuracy_interval(outcomes: Sequence[bool], level: float = 0.95, resamples: int = RESAMPLES,
                      seed: int = SEED) -> Dict[str, float]:
    """``{"accuracy", "low", "high"}``: the share of true outcomes and its bootstrap interval."""
    flags = np.asarray(outcomes, dtype=np.float64)
    if flags.size == 0:
        raise ValueError("accuracy_interval needs at least one outcome")
    means = _resampled_means(flags, resamples, seed)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return {"accuracy": float(flags.mean()), "low": float(low), "high": float(high)}


def paired_difference_interval(system: Sequence[float], baseline: Sequence[float], level: float = 0.95,
                               resamples: int = RESAMPLES, seed: int = SEED) -> Dict[str, float]:
    """``{"difference", "low", "high", "p"}``: accuracy of ``system`` minus ``baseline`` on the same
    examples (outcomes 0/1, or shares of seeds right on each example), its bootstrap interval (both resampled with the same example indices) and the
    two-sided share of resamples on the other side of 0 (doubled, at most 1)."""
    if len(system) != len(baseline) or not system:
        raise ValueError(f"paired outcomes of equal, non-zero length needed, got {len(system)} and {len(baseline)}")
    differences = np.asarray(system, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    means = _resampled_means(differences, resamples, seed)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    observed = float(differences.mean())
    other_side = float(np.mean(means <= 0)) if observed > 0 else float(np.mean(means >= 0))
    return {"difference": observed, "low": float(low), "high": float(high), "p": min(1.0, 2 * other_side)}


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(resamples, values.size))
    return values[indices].mean(axis=1)
