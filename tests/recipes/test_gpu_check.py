"""The prepared GPU check (benchmarks/gpu_fp16_check.py): its --dry-run runs the GPU check's flow on
the CPU (hmce and tmde trained in float32 and with --amp, the target-context hmce decoded by
fairseq-generate, fairseq-interactive, fairseq-ctx-translate-doc and the hub with every module
input on the model's device, both speed pairs timed) and writes its results table where --results
says; the rules that fail a training run, the device watch and the exit status do what they say."""
import math
from pathlib import Path
from typing import List

import pytest
import torch

from tests.helpers import run_module

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["fairseq-generate", "fairseq-interactive", "fairseq-ctx-translate-doc", "hub translate_stream"]


@pytest.fixture(scope="module")
def check():
    """The script as a module."""
    from benchmarks import gpu_fp16_check

    return gpu_fp16_check


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """(exit status, printed output, results file, work directory) of one dry run for hmce and tmde."""
    out = tmp_path_factory.mktemp("gpu_check")
    results = out / "results.md"
    results.write_text("# earlier results\n", encoding="utf-8")
    completed = run_module(
        "benchmarks.gpu_fp16_check", ["--dry-run", "--archs", "hmce,tmde", "--work", str(out / "work"),
         "--results", str(results)], capture_output=True, text=True, cwd=out)
    return completed.returncode, completed.stdout + completed.stderr, results.read_text(encoding="utf-8"), out / "work"


def table(text: str, heading: str) -> List[List[str]]:
    """The cells of the rows of the markdown table under the ``### heading...`` line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"### {heading}"))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("### ") or line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header row


def test_dry_run_passes_and_appends_one_section(dry_run):
    status, printed, results, _ = dry_run
    assert status == 0, printed[-3000:]
    assert results.startswith("# earlier results\n")
    assert results.count("\n## ") == 1 and ": dry run on the CPU" in results
    header = dict(line[2:].split(": ", 1) for line in results.splitlines() if line.startswith("- "))
    assert header["GPU"] == "none" and header["result"] == "PASS"
    assert header["command"].startswith("python -m benchmarks.gpu_fp16_check --dry-run --archs hmce,tmde")
    assert header["versions"].startswith(f"torch {torch.__version__}, CUDA")
    assert results.split("## ", 1)[1] in printed


def test_dry_run_trains_each_arch_in_float32_and_amp_with_falling_close_losses(dry_run):
    rows = table(dry_run[2], "Training: 10 updates")
    assert [row[:2] for row in rows] == [["hmce", "float32"], ["hmce", "amp"], ["tmde", "float32"], ["tmde", "amp"]]
    for arch, precision, first, final, change, verdict in rows:
        assert verdict == "PASS"
        assert math.isfinite(float(final)) and float(final) < float(first)
        if precision == "amp":
            assert abs(float(change.rstrip("%"))) < 5
    logs = sorted(p.name for p in (dry_run[3] / "logs").glob("train-*-*.log"))
    assert "train-hmce-amp.log" in logs and "train-tmde-float32.log" in logs


def test_dry_run_decodes_with_target_context_on_the_models_device_in_every_path(dry_run):
    rows = table(dry_run[2], "Decoding:")
    test_source = (dry_run[3] / "corpora" / "context" / "raw" / "test.en").read_text(encoding="utf-8")
    sentences = sum(1 for line in test_source.splitlines() if line.strip())
    assert [row[0] for row in rows] == PATHS
    for path, translations, distinct, calls, device, off_device, verdict in rows:
        assert (int(translations), device, off_device, verdict) == (sentences, "cpu", "0", "PASS")
        assert int(calls) > 1000 and int(distinct) > 1


def test_dry_run_times_both_pairs(dry_run):
    rows = table(dry_run[2], "Speed:")
    assert [row[0] for row in rows] == ["hmce / transformer (context_translation)",
                                        "hierarchical_attention_decoder: 196×2048 image regions / text-only"]
    for pair, model, rate, baseline, baseline_rate, ratio in rows:
        assert float(rate) > 0 and float(baseline_rate) > 0
        assert float(ratio) == pytest.approx(float(rate) / float(baseline_rate), abs=0.01)


def losses(*values: float) -> dict:
    return dict(enumerate(values, start=1))


def test_training_rules_fail_what_they_say(check):
    row = check.TrainingRow
    reference = row("hmce", "float32", 5, losses(8, 7, 6, 5, 4))
    reference.problems = reference.judge(None)
    assert reference.problems == []
    assert row("hmce", "amp", 5, losses(8, 7, 6, 5, 4.19)).judge(reference) == []
    assert row("hmce", "amp", 5, losses(8, 7, 6, 5, 4.21)).judge(reference) == [
        "final loss 4.210 not within 5% of float32's 4.000"]
    assert row("hmce", "fp16", 5, losses(8, 7, 6, 5, 8)).judge(reference)[0] == "loss not falling: final 8.000 ≥ first 8.000"
    assert row("hmce", "fp16", 5, losses(8, 7, float("nan"), 5, 4)).judge(reference) == ["non-finite loss at update 3"]
    assert row("hmce", "fp16", 5, losses(8, 7, 6, 5)).judge(reference) == [
        "no loss logged for 1 of 5 updates (first: update 5)"]
    failed = row("hmce", "float32", 5, error="fairseq-train: RuntimeError: boom")
    failed.problems = failed.judge(None)
    assert failed.problems == ["fairseq-train: RuntimeError: boom"]
    assert row("hmce", "amp", 5, losses(8, 7, 6, 5, 4)).judge(failed) == ["the float32 run it is compared with failed"]
    assert check.window(50) == 10 and check.window(10) == 2 and check.window(3) == 1


class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        return self.linear(x) + state["bias"][0]


def test_device_watch_records_tensors_off_the_models_device(check):
    watch = check.DeviceWatch()
    model = TwoInputs()
    watch.watch(model)
    model(torch.zeros(1, 2), state={"bias": [torch.zeros(2)]})
    assert (watch.calls, watch.model_devices, watch.off_device) == (2, {"cpu"}, [])
    with pytest.raises(Exception):
        model(torch.zeros(1, 2), state={"bias": [torch.zeros(2, device="meta")]})
    assert watch.off_device == ["TwoInputs.kwargs.state.bias[0] on meta, model on cpu"]


def test_device_watch_hooks_every_model_loaded_from_a_checkpoint_while_active(check):
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_model_ensemble_and_task
    watch = check.DeviceWatch()
    with watch.active():
        assert checkpoint_utils.load_model_ensemble_and_task is not original
    assert checkpoint_utils.load_model_ensemble_and_task is original


def test_a_failed_row_fails_the_run(check, tmp_path, monkeypatch):
    def failing_training(archs, plan, work, corpora, updates):
        row = check.TrainingRow("hmce", "amp", updates, error="fairseq-train exited with 1 (log: x.log)")
        row.problems = row.judge(None)
        return [row]

    monkeypatch.setattr(check, "check_training", failing_training)
    results = tmp_path / "results.md"
    status = check.main(["--dry-run", "--checks", "training", "--work", str(tmp_path), "--results", str(results)])
    text = results.read_text(encoding="utf-8")
    assert status == 1 and "- result: FAIL (1 failed rows)" in text
    assert table(text, "Training:") == [["hmce", "amp", "—", "—", "—", "FAIL: fairseq-train exited with 1 (log: x.log)"]]


def test_only_a_gpu_run_writes_into_the_repository_by_default(check):
    assert check.parse_args(["--dry-run"]).results is None
    if torch.cuda.is_available():
        assert check.parse_args([]).results == str(ROOT / "docs" / "gpu-checks.md")
    else:
        with pytest.raises(SystemExit):
            check.parse_args([])
