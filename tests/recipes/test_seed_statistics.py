"""Mean ± sd over seeds, Student's t-test (devtools.seed_statistics) against published t-table
values, scipy's p-values and hand-computed examples, and the verdicts the recipes give with them."""
import math

import pytest

from devtools.seed_statistics import (HELD, NOT_HELD, UNDECIDED, detectable_difference, direction_verdict,
                                     format_mean_sd, mean_sd, mean_sd_text, no_cost_verdict, paired_t_test, power_note,
                                     student_t_critical, student_t_two_sided_p, summary, t_test, verdict_rule)

# two-sided 5% and 1% critical values of Student's t (Abramowitz and Stegun, 1964, Table 26.10)
T_TABLE = {1: (12.706, 63.657), 2: (4.303, 9.925), 3: (3.182, 5.841), 4: (2.776, 4.604), 5: (2.571, 4.032),
           10: (2.228, 3.169), 30: (2.042, 2.750)}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_two_sided_p_and_critical_values_are_the_t_tables(df):
    five, one = T_TABLE[df]
    assert student_t_two_sided_p(five, df) == pytest.approx(0.05, abs=1e-4)
    assert student_t_two_sided_p(-one, df) == pytest.approx(0.01, abs=1e-4)
    assert student_t_critical(df, 0.05) == pytest.approx(five, abs=5e-4)
    assert student_t_two_sided_p(0.0, df) == 1.0 and student_t_two_sided_p(math.inf, df) == 0.0


def test_paired_t_test_of_three_seeds_by_hand():
    # differences 1.0, 2.0, 3.0: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.4641, df 2: p = 1 - t / sqrt(t² + 2)
    test = paired_t_test([31.0, 32.5, 34.0], [30.0, 30.5, 31.0])
    assert (test.differences, test.mean, test.sd) == ((1.0, 2.0, 3.0), 2.0, 1.0)
    assert test.t == pytest.approx(2 * math.sqrt(3))
    assert test.p == pytest.approx(1 - test.t / math.sqrt(test.t ** 2 + 2))
    assert paired_t_test([1.0, 2.0], [0.0, 1.0]).p == 0.0  # the same difference every seed
    assert paired_t_test([1.0, 2.0], [1.0, 2.0]).p == 1.0
    assert paired_t_test([1.0], [0.0]).p is None
    with pytest.raises(ValueError, match="one value of each system per seed, got 2 and 1"):
        paired_t_test([1.0, 2.0], [0.0])


def test_mean_sd_and_the_detectable_difference_of_three_seeds():
    assert mean_sd([34.62, 35.0, 34.24]) == (pytest.approx(34.62), pytest.approx(0.38))
    assert mean_sd([34.62]) == (34.62, None)
    assert detectable_difference(3) == pytest.approx(4.3027 / math.sqrt(3), abs=1e-3)


def test_t_test_p_values_are_students():
    # p-values of Student's t (scipy.stats.ttest_1samp gives the same)
    assert t_test([1.0, 2.0, 3.0]).p == pytest.approx(0.07417990022744854, rel=1e-9)
    assert t_test([0.5, -0.2, 0.1, 0.3]).p == pytest.approx(0.32576571053495285, rel=1e-9)
    assert t_test([100.0, 101.0, 99.0]).p == pytest.approx(3.333166675925385e-05, rel=1e-6)
    assert t_test([1.0, 2.0, 3.0]).describe() == "+2.00 ± 1.00, paired t-test over 3 seeds p = 0.074"
    assert t_test([0.4]).describe(3) == "+0.400"
    assert format_mean_sd([1.0, 2.0, 3.0]) == "2.00 ± 1.00" and format_mean_sd([1.5]) == "1.50"
    assert mean_sd_text(summary([-1.0, -3.0]), sign=True) == "-2.00 ± 1.41"


def test_verdicts_of_a_direction_and_of_costing_nothing():
    # held / did not hold need p < 0.05 in either direction; p ≥ 0.05 or no difference: undecided
    assert [direction_verdict(d, p) for d, p in ((1.3, 0.004), (-1.3, 0.004), (1.3, 0.05), (-0.4, 0.2), (0.0, 0.0))] \
        == [HELD, NOT_HELD, UNDECIDED, UNDECIDED, UNDECIDED]
    # one seed without a test: the point estimate, marked untested
    assert direction_verdict(0.4, None) == "held (one seed, untested)"
    assert direction_verdict(-0.4, None) == "did not hold (one seed, untested)"
    # costs nothing: refuted only by a significant loss
    assert [no_cost_verdict(d, p) for d, p in ((0.2, 0.9), (0.0, 1.0), (-0.5, 0.3), (-0.5, 0.01))] == \
        [HELD, HELD, UNDECIDED, NOT_HELD]
    assert no_cost_verdict(-0.1, None) == "did not hold (one seed, untested)"
    assert "With one seed the point estimate decides, marked untested." in verdict_rule()
    assert power_note(3).startswith("With 3 seeds (2 degrees of freedom) the t-test reaches p < 0.05 only when the "
                                    "mean difference exceeds 2.48 times")
