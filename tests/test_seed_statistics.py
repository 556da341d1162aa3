"""Mean ± sd over seeds and Student's paired t-test (devtools.seed_statistics) against
published t-table values and hand-computed examples."""
import math

import pytest

from devtools.seed_statistics import (detectable_difference, mean_sd, paired_t_test, student_t_critical,
                                              student_t_two_sided_p)

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
    assert (test.n, test.mean_difference, test.sd_difference) == (3, 2.0, 1.0)
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
