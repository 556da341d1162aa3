"""What the real-data recipes share (devtools.recipe_runs, plateau_rule, recipe_report): the
plateau rule and the chunked training it ends, the update count of a checkpoint (read
weights-only), the run options and seeds, the command lines that resume a run or do it in a job,
jobs side by side with a log each, the header and the unfinished runs of a results file, and plots
without matplotlib."""
import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from devtools.plateau_rule import (AVERAGED_BLEU_PLATEAU, BLEU_PLATEAU, PlateauRule, checkpoint_updates,
                                   train_until_plateau)
from devtools.machine_facts import MachineFacts
from devtools.recipe_report import RunHeader, plot_if_possible, trained_on_line, unfinished_lines, unfinished_run
from devtools.recipe_runs import (Job, add_run_options, check_run_options, device_args, edited_argv, job_command,
                                  precision_args,
                                  resume_command, run_jobs, seed_dirs, seed_list)

ERROR_RULE = PlateauRule("error", min_gain=0.5, higher_is_better=False)


def test_the_plateau_compares_the_last_fifth_of_the_updates_with_the_best_before():
    curve = [(1000, 20.0), (2000, 10.0), (3000, 8.0), (4000, 7.8), (5000, 7.6)]
    judged = ERROR_RULE.judge(curve)
    assert judged.judged and judged.plateaued  # best before 4000: 7.8; after: 7.6; gain 0.2 < 0.5
    assert judged.text == ("best 7.80 up to update 4000, best 7.60 in updates 4001–5000 (gain +0.20): plateau (gain "
                           "under 0.5)")
    assert not ERROR_RULE.judge([*curve[:4], (5000, 7.2)]).plateaued  # gain 0.6
    assert ERROR_RULE.judge(curve[:4]).as_dict() == {
        "judged": False, "plateaued": False, "text": "not judged: 4 validation(s), fewer than the 5 the rule needs"}
    # ten validations: the last fifth is the last two
    bleu = [(100 * i, b) for i, b in enumerate([1, 5, 9, 12, 14, 15, 15.5, 15.8, 16.0, 16.2], 1)]
    assert BLEU_PLATEAU.judge(bleu).plateaued  # 16.2 against 15.8 before update 800: gain 0.4
    assert not BLEU_PLATEAU.judge([*bleu[:-1], (1000, 16.3)]).plateaued  # gain 0.5 is not under 0.5
    assert BLEU_PLATEAU.judge([*bleu[:-1], (1000, 16.3)]).text.endswith("(gain +0.50): still improving (gain of 0.5 "
                                                                        "or more)")


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


def parser_of(stage_one_seed: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="recipe.py", allow_abbrev=False)
    parser.add_argument("--work")
    parser.add_argument("--models", nargs="+")
    parser.add_argument("--extra-test", nargs=2, action="append", default=[])
    parser.add_argument("--restart", action="store_true")
    add_run_options(parser, "models and seeds", {"--results": ["--out"]}, stage_one_seed)
    return parser



class _RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


def test_checkpoint_updates_reads_weights_only_and_refuses_a_pickle_that_runs_code(tmp_path):
    """The recipes resume from checkpoint_last.pt: its update count is read weights-only, with the
    allow-list (--eval-bleu stores numpy arrays); a checkpoint that would run code is not loaded."""
    state = {"optimizer_history": [{"num_updates": 7}], "extra_state": {"bleu_counts": np.arange(4)}}
    torch.save(state, tmp_path / "checkpoint_last.pt")
    assert checkpoint_updates(tmp_path / "checkpoint_last.pt") == 7
    assert checkpoint_updates(tmp_path / "missing.pt") == 0
    marker = tmp_path / "executed"
    torch.save({**state, "extra_state": {"payload": _RunsCode(marker)}}, tmp_path / "crafted.pt")
    with pytest.raises(ValueError, match=r"cannot read the training progress of .*crafted\.pt.*allow-list"):
        checkpoint_updates(tmp_path / "crafted.pt")
    assert not marker.exists(), "the checkpoint ran code"


def test_the_window_mean_rule_compares_the_mean_of_the_last_fifth_with_the_fifth_before():
    """Means of windows, not maxima: a curve validated every 350 updates up to 2800 compares its
    points above update 2240 with those in 1681–2240; one high point no longer decides."""
    curve = [(350 * k, bleu) for k, bleu in enumerate([30.0, 35.0, 37.0, 38.0, 39.0, 39.2, 39.4, 39.6], start=1)]
    judged = AVERAGED_BLEU_PLATEAU.judge(curve)  # tail 2450, 2800: 39.5; before 1750, 2100: 39.1
    assert judged.judged and judged.plateaued
    assert "mean 39.10 of 2 validation(s) in updates 1681–2240, mean 39.50 of 2 in 2241–2800 (gain +0.40)" in judged.text
    lucky = [*curve[:-1], (2800, 40.4)]  # the best rule sees +1.4 over 39.0; the means +0.80
    assert not AVERAGED_BLEU_PLATEAU.judge(lucky).plateaued and "(gain +0.80)" in AVERAGED_BLEU_PLATEAU.judge(lucky).text
    assert not AVERAGED_BLEU_PLATEAU.judge(curve[:4]).judged  # fewer than 5 validations
    assert "the mean of the validations in the last fifth" in AVERAGED_BLEU_PLATEAU.describe("5 epochs", 2800, False)


def test_precision_auto_is_amp_only_where_bfloat16_products_are_native(monkeypatch, caplog):
    """--precision auto, every recipe's default: --amp on a GPU or a CPU with native bfloat16
    (where it trains 1.4-1.9x as fast), float32 on any other CPU (where --amp runs at about 0.5x);
    the choice is logged and is what the run records and trains with."""
    from fairseq_ctx.core.mixed_precision import NATIVE_BFLOAT16_ENV

    parser = parser_of()
    for native, chosen in ((True, "amp"), (False, "fp32")):
        monkeypatch.setenv(NATIVE_BFLOAT16_ENV, str(int(native)))
        args = parser.parse_args(["--out", "r"])
        with caplog.at_level(logging.INFO, logger="devtools.recipe_runs"):
            check_run_options(parser, args)
        assert args.precision == chosen and precision_args(args.precision) == (["--amp"] if native else [])
        assert f"--precision auto: {chosen} (this CPU {'multiplies bfloat16 natively' if native else 'has no native'}" \
            in caplog.text
        explicit = parser.parse_args(["--out", "r", "--precision", "amp"])
        check_run_options(parser, explicit)
        assert explicit.precision == "amp"  # given: kept (fairseq-train warns on a CPU without bfloat16)
    with pytest.raises(ValueError, match="auto chosen first"):
        precision_args("auto")


def test_run_options_seeds_and_precision(capsys):
    assert seed_list("1,2,3") == [1, 2, 3]
    for bad in ("1,1", "a", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="e.g. 1,2,3"):
            seed_list(bad)
    assert precision_args("amp") == ["--amp"] and precision_args("fp32") == []
    parser = parser_of()
    args = parser.parse_args(["--out", "r"])
    assert (args.results, args.jobs, args.threads, args.precision, args.seed, args.no_report) == \
        ("r", 2, 1, "auto", None, False)
    assert seed_dirs(args, Path("w")) == [(1, Path("w"))]
    assert seed_dirs(parser.parse_args(["--seeds", "2,3"]), Path("w")) == [(2, Path("w/seed2")), (3, Path("w/seed3"))]
    with pytest.raises(SystemExit):
        check_run_options(parser, parser.parse_args(["--seed", "2", "--seeds", "1,2"]))
    assert "give --seed or --seeds, not both" in capsys.readouterr().err
    staged = parser_of(stage_one_seed=True)
    staged_args = staged.parse_args(["--seed", "2", "--seeds", "1,2"])  # stage 1's seed, then stage 2's seeds
    check_run_options(staged, staged_args, stage_one_seed=True)
    with pytest.raises(SystemExit):
        check_run_options(parser, parser.parse_args(["--jobs", "0"]))
    assert "--jobs 0 --threads 1: both must be at least 1" in capsys.readouterr().err


def test_device_option_passes_cpu_or_nothing_and_cuda_needs_a_gpu(capsys, monkeypatch):
    """--device cpu (the default) gives the tools fairseq's --cpu; cuda gives none, so that they
    run on the GPU, and is refused before any run where torch sees no GPU, saying what to do."""
    parser = parser_of()
    assert parser.parse_args([]).device == "cpu"
    assert device_args("cpu") == ["--cpu"] and device_args("cuda") == []
    with pytest.raises(ValueError, match="device must be one of cpu, cuda"):
        device_args("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        check_run_options(parser, parser.parse_args(["--device", "cuda"]))
    assert "--device cuda: torch " in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    check_run_options(parser, parser.parse_args(["--device", "cuda"]))
    machine = {"cpu_cores": 16, "cpu": "x", "gpu": "H200", "torch_threads": 1, "torch": "2", "platform": "p"}
    header = RunHeader("c", "amp", [1], 1, 1, "b", "r", "c", device="cuda", machine=machine)
    assert "float16 mixed precision with dynamic loss scaling on the GPU" in "\n".join(header.lines())
    assert RunHeader("c", "fp32", [1], 1, 1, "b", "r", "c", device="cuda", machine=machine).lines()[3] == \
        "- Precision: fp32 (float32 throughout, on the GPU)"


def test_commands_that_resume_a_run_or_do_it_in_a_job():
    parser = parser_of()
    argv = ["--work", "w", "--seeds=1,2", "--models", "a", "b", "--extra-test", "x.fr", "x.en", "--restart",
            "--jobs", "2", "--out", "r"]
    assert edited_argv(parser, argv, {"--seeds": "2", "--models": "b"}, drop=["--restart", "--results"]) == \
        ["--work", "w", "--extra-test", "x.fr", "x.en", "--jobs", "2", "--seeds", "2", "--models", "b"]
    assert resume_command(parser, "examples/r.py", argv, {"--seeds": "2", "--models": "b"}, drop=["--restart"]) == \
        "python -m examples.r --work w --extra-test x.fr x.en --jobs 2 --out r --seeds 2 --models b"
    command = job_command(parser, "examples/r.py", argv, {"--seeds": "2", "--models": "b"}, drop=["--restart"])
    assert command[:3] == (sys.executable, "-m", "examples.r")
    child = parser.parse_args(command[3:])
    assert (child.seeds, child.models, child.jobs, child.no_report, child.restart, child.results) == \
        ([2], ["b"], 1, True, False, "r")


def test_jobs_run_side_by_side_each_with_its_own_log(tmp_path):
    def job(name, code):
        program = (f"import time\nfor i in range(3):\n    print('{name}', i, flush=True)\n    time.sleep(0.2)\n"
                   f"raise SystemExit({code})")
        return Job(name, (sys.executable, "-c", program), tmp_path / f"{name}.log", lambda: None)

    jobs = [job("first", 0), job("second", 3), job("third", 0)]
    failed = run_jobs(jobs, parallel=2, threads=1, poll_s=0.05)
    assert failed == {"second": f"exit 3, see {jobs[1].log}"}
    for one in jobs:  # every log holds its own job's output only, in order
        assert one.log.read_text().split() == [word for i in range(3) for word in (one.name, str(i))]


def test_one_job_at_a_time_runs_here_and_a_failure_stops_no_other(tmp_path):
    done = []
    jobs = [Job("a", ("false",), tmp_path / "a.log", lambda: done.append("a")),
            Job("b", ("false",), tmp_path / "b.log", lambda: int("not a number")),
            Job("c", ("false",), tmp_path / "c.log", lambda: done.append("c"))]
    failed = run_jobs(jobs, parallel=1, threads=1)
    assert done == ["a", "c"] and list(failed) == ["b"]
    assert failed["b"].startswith("ValueError: invalid literal for int()")
    assert not any(job.log.exists() for job in jobs)  # here, no job logs: the recipe's own output


def test_results_header_and_unfinished_runs_in_the_same_words():
    header = RunHeader("python examples/r.py --seeds 1,2", "amp", [1, 2], 2, 1, "5000 updates", "BLEU rule", "plateau",
                       machine={"cpu_cores": 2, "cpu": "x", "gpu": "none", "torch_threads": 1, "torch": "2",
                                "platform": "p"})
    lines = header.lines()
    assert [line.split(":")[0] for line in lines] == [
        "- Date", "- Machine", "- Trained on", "- Precision", "- Seeds", "- Budget", "- Convergence rule (fixed before the runs)",
        "- Convergence", "- Command", "- Verdicts"]
    assert "- Precision: amp (training under fairseq's --amp: bfloat16 mixed precision" in "\n".join(lines)
    assert "- Seeds: 1, 2" in lines and "- Command: `python examples/r.py --seeds 1,2`" in lines
    here = MachineFacts(**header.machine).describe()
    assert lines[2] == "- Trained on: the machine above (every run, as its training log records)"
    assert trained_on_line({"a seed 1": [here], "b seed 1": [here]}, here) == lines[2]
    assert trained_on_line({"a seed 1": [here], "b seed 1": ["not recorded", here], "b seed 2": ["gpu"],
                            "c seed 1": ["gpu"], "d seed 1": []}, here) == (
        "- Trained on: the machine above, except b seed 1: not recorded then " + here + "; b seed 2, c seed 1: gpu; "
        "d seed 1: not recorded")
    assert header.as_dict()["verdict_rule"].endswith("With one seed the point estimate decides, marked untested.")
    assert unfinished_lines([])[-1] == "None: every requested run has all its results."
    item = unfinished_run("tmde", 2, "not trained yet", "python r.py --seeds 2 --models tmde")
    assert unfinished_lines([item])[-1] == \
        "- tmde, seed 2: not trained yet; resume: `python r.py --seeds 2 --models tmde`"


def test_a_plot_without_matplotlib_is_skipped_with_one_message(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    drawn = []
    with caplog.at_level(logging.WARNING):
        assert plot_if_possible(lambda: drawn.append(1), tmp_path / "x.png") is False
    assert drawn == [] and not (tmp_path / "x.png").exists()
    assert [r.getMessage() for r in caplog.records] == [
        'plot x.png skipped: matplotlib is not installed (pip install "fairseq-ctx[plots]"); the tables are complete '
        'without it']
