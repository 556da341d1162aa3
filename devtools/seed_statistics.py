"""Statistics over training runs that differ only in their seed: mean ± sd of a score, and
Student's paired t-test of per-seed differences between two systems (two-sided), with the
smallest mean difference it can call significant for the number of seeds it has."""
import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple


@dataclass(frozen=True)
class PairedTTest:
    """Student's paired t-test of ``a − b`` over seeds: n pairs, mean and sample sd of the
    differences, t statistic and two-sided p (None with fewer than two pairs)."""

    n: int
    mean_difference: float
    sd_difference: Optional[float]
    t: Optional[float]
    p: Optional[float]


def mean_sd(values: Sequence[float]) -> Tuple[float, Optional[float]]:
    """Mean and sample standard deviation (n − 1 in the denominator; None for one value)."""
    if not values:
        raise ValueError("mean_sd needs at least one value")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def student_t_two_sided_p(t: float, df: int) -> float:
    """P(|T| ≥ |t|) for Student's t with ``df`` degrees of freedom, exact for integer ``df``
    (Abramowitz and Stegun, 1964, 26.7.3 and 26.7.4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 1:
        series, term = 0.0, math.cos(theta)
        if df > 1:
            series = term
            for k in range(1, (df - 3) // 2 + 1):
                term *= cos2 * (2 * k) / (2 * k + 1)
                series += term
        inside = (2 / math.pi) * (theta + math.sin(theta) * series)
    else:
        series = term = 1.0
        for k in range(1, (df - 2) // 2 + 1):
            term *= cos2 * (2 * k - 1) / (2 * k)
            series += term
        inside = math.sin(theta) * series
    return min(1.0, max(0.0, 1.0 - inside))


def student_t_critical(df: int, alpha: float = 0.05) -> float:
    """The |t| at which the two-sided p of :func:`student_t_two_sided_p` is ``alpha`` (bisection)."""
    low, high = 0.0, 1.0
    while student_t_two_sided_p(high, df) > alpha:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if student_t_two_sided_p(middle, df) > alpha else (low, middle)
    return (low + high) / 2


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> PairedTTest:
    """Paired t-test of ``a[i] − b[i]`` (seed i of two systems), two-sided. Differences that are
    all equal give t = ±inf and p = 0 (or t = 0 and p = 1 when they are all zero)."""
    if len(a) != len(b):
        raise ValueError(f"paired_t_test needs one value of each system per seed, got {len(a)} and {len(b)}")
    differences = [x - y for x, y in zip(a, b)]
    mean, sd = mean_sd(differences)
    if sd is None:
        return PairedTTest(1, mean, None, None, None)
    if sd == 0.0:
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        t = mean / (sd / math.sqrt(len(differences)))
    return PairedTTest(len(differences), mean, sd, t, student_t_two_sided_p(t, len(differences) - 1))


def detectable_difference(n: int, alpha: float = 0.05) -> float:
    """How many seed-to-seed standard deviations of the difference the mean difference must
    exceed for a paired t-test over ``n`` seeds to reach two-sided p < ``alpha``: t_crit / √n."""
    return student_t_critical(n - 1, alpha) / math.sqrt(n)
