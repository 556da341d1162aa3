"""What the real-data recipes share (examples/embedding/recipe_runs.py): the plateau rule and the
chunked training it ends, the paired t-test over seeds and its verdicts, seeds, jobs run side
by side with a log each, the options a job repeats, and plots without matplotlib."""
import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "embedding"))
import recipe_runs  # noqa: E402
from recipe_runs import (HELD, NOT_HELD, UNDECIDED, Job, PlateauRule, paired_t_test, passed_on,  # noqa: E402
                         precision_args, run_jobs, seed_list, train_until_plateau)

ERROR_RULE = PlateauRule("error", min_gain=0.5, higher_is_better=False)
BLEU_RULE = PlateauRule("BLEU", min_gain=0.5, higher_is_better=True)


def test_the_plateau_compares_the_last_fifth_of_the_updates_with_the_best_before():
    curve = [(1000, 20.0), (2000, 10.0), (3000, 8.0), (4000, 7.8), (5000, 7.6)]
    judged = ERROR_RULE.judge(curve)
    assert judged.plateaued  # best before 4000: 7.8; after: 7.6; gain 0.2 < 0.5
    assert "best 7.80 up to update 4000, best 7.60 in updates 4001–5000 (gain +0.20)" in judged.text
    assert not ERROR_RULE.judge([*curve[:4], (5000, 7.2)]).plateaued  # gain 0.6
    assert not ERROR_RULE.judge(curve[:4]).plateaued  # four validations: not judged yet
    assert "fewer than the 5" in ERROR_RULE.judge(curve[:4]).text
    # ten validations: the last fifth is the last two
    bleu = [(100 * i, b) for i, b in enumerate([1, 5, 9, 12, 14, 15, 15.5, 15.8, 16.0, 16.2], 1)]
    assert BLEU_RULE.judge(bleu).plateaued  # 16.2 against 15.8 before update 800: gain 0.4
    assert not BLEU_RULE.judge([*bleu[:-1], (1000, 16.3)]).plateaued  # gain 0.5 is not under 0.5


def test_training_stops_at_the_first_plateau_and_resumes_without_training_again():
    values = {100: 10.0, 200: 5.0, 300: 4.0, 400: 3.9, 500: 3.8, 600: 3.7, 700: 3.7}
    trained, recorded = [], []

    def run(curve, budget):
        return train_until_plateau(ERROR_RULE, 100, budget, curve, trained.append, values.__getitem__,
                                   lambda c: recorded.append(list(c)))

    curve = []
    assert run(curve, 300) == "budget"
    assert trained == [100, 200, 300] and curve == [(u, values[u]) for u in (100, 200, 300)]
    assert recorded[-1] == curve
    trained.clear()
    assert run(curve, 10_000) == "plateau"  # resumed: 100–300 are not trained again
    assert trained == [400, 500]  # at 500: best 3.9 up to 400, 3.8 after: gain 0.1
    assert run(curve, 10_000) == "plateau" and trained == [400, 500]  # a finished run trains nothing
    odd = []
    assert train_until_plateau(ERROR_RULE, 100, 250, odd, lambda u: None, values.get, lambda c: None) == "budget"
    assert [u for u, _ in odd] == [100, 200, 250]  # the last chunk ends at the budget


def test_paired_t_test_over_seeds_and_its_verdicts():
    # p-values of Student's t (scipy.stats.ttest_1samp gives the same)
    assert paired_t_test([1.0, 2.0, 3.0]).p == pytest.approx(0.07417990022744854, rel=1e-9)
    assert paired_t_test([0.5, -0.2, 0.1, 0.3]).p == pytest.approx(0.32576571053495285, rel=1e-9)
    assert paired_t_test([100.0, 101.0, 99.0]).p == pytest.approx(3.333166675925385e-05, rel=1e-6)
    test = paired_t_test([1.0, 2.0, 3.0])
    assert (test.mean, test.sd) == (2.0, 1.0)
    assert test.verdict(expect_positive=True) == UNDECIDED  # p 0.074
    assert paired_t_test([100.0, 101.0, 99.0]).verdict(expect_positive=True) == HELD
    assert paired_t_test([-100.0, -101.0, -99.0]).verdict(expect_positive=True) == NOT_HELD
    assert paired_t_test([-100.0, -101.0, -99.0]).verdict(expect_positive=False) == HELD
    one = paired_t_test([0.4])
    assert one.p is None and one.verdict(expect_positive=True) == "held (one seed, untested)"
    assert test.describe() == "+2.00 ± 1.00, paired t-test over 3 seeds p = 0.074"
    assert recipe_runs.format_mean_sd([1.0, 2.0, 3.0]) == "2.00 ± 1.00" and recipe_runs.format_mean_sd([1.5]) == "1.50"


def test_seeds_precision_and_the_options_a_job_repeats():
    assert seed_list("1,2,3") == [1, 2, 3]
    for bad in ("1,1", "a", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="e.g. 1,2,3"):
            seed_list(bad)
    assert precision_args("amp") == ["--amp"] and precision_args("fp32") == []
    assert recipe_runs.seed_work(Path("w"), 2, True) == Path("w/seed2")
    assert recipe_runs.seed_work(Path("w"), 2, False) == Path("w")
    args = argparse.Namespace(work="w", k_best=4, seeds=[1, 2], results=None, no_eval=True)
    assert passed_on(args, skip=("seeds", "no_eval")) == ["--work", "w", "--k-best", "4"]
    with pytest.raises(ValueError, match="seeds"):
        passed_on(args, skip=("no_eval",))


def test_jobs_run_side_by_side_each_with_its_own_log(tmp_path):
    def job(name, code):
        program = (f"import time\nfor i in range(3):\n    print('{name}', i, flush=True)\n    time.sleep(0.2)\n"
                   f"raise SystemExit({code})")
        return Job(name, (sys.executable, "-c", program), tmp_path / f"{name}.log")

    jobs = [job("first", 0), job("second", 3), job("third", 0)]
    failed = run_jobs(jobs, parallel=2, threads=1, poll_s=0.05)
    assert failed == [jobs[1]]
    for one in jobs:  # every log holds its own job's output only, in order
        assert one.log.read_text().split() == [word for i in range(3) for word in (one.name, str(i))]


def test_a_plot_without_matplotlib_is_skipped_with_one_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    drawn = []
    assert recipe_runs.plot_if_possible(lambda: drawn.append(1), tmp_path / "x.png") is False
    assert drawn == [] and not (tmp_path / "x.png").exists()
    assert capsys.readouterr().out.count("matplotlib is not installed, so x.png was not drawn") == 1
