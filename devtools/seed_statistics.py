"""Statistics over training runs that differ only in their seed, and the verdicts the recipes'
results files give with them: mean ± sd of a score; Student's t-test of per-seed differences
between two systems (paired, two-sided), with the smallest mean difference it can call
significant for the number of seeds it has; held / did not hold / undecided for an expected
direction or for "costs nothing"."""
import math
import statistics
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

SIGNIFICANCE = 0.05  # two-sided p below which a difference counts as more than chance (fixed before any run)
HELD, NOT_HELD, UNDECIDED = "held", "did not hold", "undecided"
UNTESTED = "(one seed, untested)"


def mean_sd(values: Sequence[float]) -> Tuple[float, Optional[float]]:
    """Mean and sample standard deviation (n − 1 in the denominator; None for one value)."""
    if not values:
        raise ValueError("mean_sd needs at least one value")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def summary(values: Sequence[float]) -> Dict[str, Optional[float]]:
    """``{"mean": …, "sd": …}`` of :func:`mean_sd`, as the results files store it."""
    mean, sd = mean_sd(values)
    return {"mean": mean, "sd": sd}


def mean_sd_text(values: Mapping[str, Optional[float]], digits: int = 2, sign: bool = False) -> str:
    """``12.34 ± 0.56`` of a :func:`summary` (the mean alone for one value); ``sign``: with + or −."""
    mean = f"{values['mean']:{'+' if sign else ''}.{digits}f}"
    return mean if values["sd"] is None else f"{mean} ± {values['sd']:.{digits}f}"


def format_mean_sd(values: Sequence[float], digits: int = 2, sign: bool = False) -> str:
    """:func:`mean_sd_text` of the values themselves."""
    return mean_sd_text(summary(values), digits, sign)


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


def student_t_critical(df: int, alpha: float = SIGNIFICANCE) -> float:
    """The |t| at which the two-sided p of :func:`student_t_two_sided_p` is ``alpha`` (bisection)."""
    low, high = 0.0, 1.0
    while student_t_two_sided_p(high, df) > alpha:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if student_t_two_sided_p(middle, df) > alpha else (low, middle)
    return (low + high) / 2


def detectable_difference(n: int, alpha: float = SIGNIFICANCE) -> float:
    """How many seed-to-seed standard deviations of the difference the mean difference must
    exceed for a paired t-test over ``n`` seeds to reach two-sided p < ``alpha``: t_crit / √n."""
    return student_t_critical(n - 1, alpha) / math.sqrt(n)


@dataclass(frozen=True)
class SeedTest:
    """Student's t-test of per-seed differences against 0, two-sided: the differences, their mean
    and sample sd, t and p (sd, t and p None for one seed). Differences that are all equal give
    t = ±inf and p = 0 (t = 0 and p = 1 when they are all zero)."""

    differences: Tuple[float, ...]
    mean: float
    sd: Optional[float]
    t: Optional[float]
    p: Optional[float]

    def describe(self, digits: int = 2, test: str = "paired t-test") -> str:
        """``+1.23 ± 0.45, paired t-test over 3 seeds p = 0.012`` (``test`` names the test)."""
        p = "" if self.p is None else f", {test} over {len(self.differences)} seeds p = {self.p:.3f}"
        return mean_sd_text({"mean": self.mean, "sd": self.sd}, digits, sign=True) + p


def t_test(differences: Sequence[float]) -> SeedTest:
    """Student's one-sample t-test of ``differences`` (one per seed) against 0."""
    mean, sd = mean_sd(differences)
    if sd is None:
        return SeedTest(tuple(differences), mean, None, None, None)
    if sd == 0.0:
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        t = mean / (sd / math.sqrt(len(differences)))
    return SeedTest(tuple(differences), mean, sd, t, student_t_two_sided_p(t, len(differences) - 1))


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> SeedTest:
    """Paired t-test of ``a[i] − b[i]`` (seed i of two systems, which share the seed's
    initialisation and batch order), two-sided."""
    if len(a) != len(b):
        raise ValueError(f"paired_t_test needs one value of each system per seed, got {len(a)} and {len(b)}")
    return t_test([x - y for x, y in zip(a, b)])


def direction_verdict(difference: float, p: Optional[float]) -> str:
    """Verdict on "``difference`` is positive" (the expected direction): held / did not hold when
    it is positive / negative with p < SIGNIFICANCE, undecided otherwise; without a test (one
    seed, p None) the point estimate decides, marked untested."""
    if p is None:
        return f"{HELD if difference > 0 else NOT_HELD} {UNTESTED}"
    if p >= SIGNIFICANCE or difference == 0:
        return UNDECIDED
    return HELD if difference > 0 else NOT_HELD


def no_cost_verdict(difference: float, p: Optional[float]) -> str:
    """Verdict on "``difference`` is not negative" (a change costs nothing): did not hold when it is
    negative with p < SIGNIFICANCE, undecided when negative with p ≥ SIGNIFICANCE, held when it is
    not negative; without a test (one seed, p None) the point estimate decides, marked untested."""
    if p is None:
        return f"{HELD if difference >= 0 else NOT_HELD} {UNTESTED}"
    if difference >= 0:
        return HELD
    return NOT_HELD if p < SIGNIFICANCE else UNDECIDED


def verdict_rule(one_seed: str = "the point estimate decides, marked untested") -> str:
    """The verdict rule in words, as every results file states it; ``one_seed``: what decides
    with one seed."""
    return (f"Verdicts: an expected direction held when the mean difference over seeds goes that way with "
            f"p < {SIGNIFICANCE} (Student's paired t-test over seeds, two-sided: a seed's runs share "
            f"initialisation and batch order), did not hold when it goes the other way with p < {SIGNIFICANCE}, "
            f"and is undecided otherwise; \"costs nothing\" did not hold when the difference is negative with "
            f"p < {SIGNIFICANCE}, is undecided when it is negative with p ≥ {SIGNIFICANCE} and held otherwise. "
            f"With one seed {one_seed}.")


def power_note(seeds: int) -> str:
    """What a paired t-test over ``seeds`` seeds can detect, in words."""
    if seeds < 2:
        return "One seed: no test of seed-to-seed variation is possible."
    factor = detectable_difference(seeds)
    freedom = f"{seeds - 1} degree{'s' if seeds > 2 else ''} of freedom"
    return (f"With {seeds} seeds ({freedom}) the t-test reaches p < {SIGNIFICANCE} only when the mean difference "
            f"exceeds {factor:.2f} times the seed-to-seed sd of the differences: its power is low, and a real "
            f"difference smaller than that is mostly called undecided.")
