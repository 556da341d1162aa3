"""Degenerate batches (one sentence, no context, one position) with the CKA/HSIC criterions:
the statistic is defined or the term is skipped and counted, the loss and every gradient are
finite, in float32 and (at module level) in half precision."""
import copy

import numpy as np
import pytest
import torch
from fairseq import metrics, tasks

from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR, TINY_MODEL, parse_cfg
from fairseq_ctx.analysis.cka import cka, mean_pairwise_linear_hsic, sample_paired_rows, sample_rows

HSIC_ARGS = ["--criterion", "head_diversity", "--hsic-lambda", "0.01", "--ortho-lambda", "0.5"]
CKA_ARGS = ["--criterion", "cka_alignment", "--cka-lambda", "0.5", "--cka-representations", "source,context"]


def setup(data, extra, arch: str = "hmce"):
    cfg = parse_cfg(data, arch, extra)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("train")
    return task, model, criterion


def document_starts(task):
    return [int(i) for i in np.flatnonzero(task.dataset("train").positions == 0)]


def batch(task, indices):
    dataset = task.dataset("train")
    return dataset.collater([dataset[i] for i in indices])


def one_token_batch(task):
    """One example whose source and target are just </s>: every attention module of a
    sentence-level model sees a single query position."""
    eos = torch.tensor([task.source_dictionary.eos()])
    return task.dataset("train").collater([{"id": 0, "source": eos, "target": eos, "context_ids": []}])


def backward_and_check_gradients(model, loss):
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    non_finite = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert missing == [] and non_finite == []


def test_head_hsic_of_a_single_position_is_refused_not_nan():
    heads = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match="head HSIC needs at least 2 rows .positions., got 1"):
        mean_pairwise_linear_hsic(heads)
    assert torch.isfinite(mean_pairwise_linear_hsic(torch.randn(2, 4, 8)))


@pytest.mark.parametrize("kernel,dim", [("linear", 3), ("linear", 16), ("rbf", 3)], ids=["feature", "gram", "rbf"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cka_with_a_constant_side_is_zero_with_zero_gradients(kernel, dim, dtype):
    x = torch.randn(6, dim, dtype=dtype, requires_grad=True)
    # equal rows whose mean is not exact in floating point (0.1 × 6 / 6)
    y = torch.full((6, dim), 0.1, dtype=dtype, requires_grad=True)
    value = cka(x, y, kernel=kernel)
    value.backward()
    assert value.item() == 0.0
    assert torch.equal(x.grad, torch.zeros_like(x)) and torch.equal(y.grad, torch.zeros_like(y))
    assert 0.0 < cka(x, y + torch.randn_like(y), kernel=kernel).item() <= 1.0


def test_sampling_from_all_padding_gives_no_rows():
    states, other = torch.randn(2, 5, 8), torch.randn(2, 3, 4)
    all_padding = torch.ones(2, 3, dtype=torch.bool)
    assert sample_rows(other, all_padding, 16).shape == (0, 4)
    a, b = sample_paired_rows(states, None, other, all_padding, 16)
    assert a.shape == (0, 8) and b.shape == (0, 4)


def test_head_diversity_on_one_sentence_batches_leaves_out_single_position_modules(tiny_data):
    task, model, criterion = setup(tiny_data, HSIC_ARGS)
    model.train()
    first = document_starts(task)[0]
    for indices in ([first], [first + 1]):  # document-initial; one context sentence
        model.zero_grad()
        loss, sample_size, log = criterion(model, batch(task, indices))
        hsic, ortho = log["hsic"] / log["hsic_size"], log["ortho"] / log["ortho_size"]
        assert log["hsic_skipped"] >= 1 and log["ortho_skipped"] == 0
        assert torch.isfinite(loss) and np.isfinite(float(hsic))
        assert torch.allclose(loss, log["ce_loss"] + (0.01 * hsic + 0.5 * ortho) * sample_size, rtol=1e-5)
        backward_and_check_gradients(model, loss)


def test_head_diversity_with_every_module_at_one_position_trains_on_cross_entropy_alone(tiny_data):
    task, model, criterion = setup(tiny_data, ["--context-size", "0", *HSIC_ARGS], arch="transformer")
    model.train()
    loss, sample_size, log = criterion(model, one_token_batch(task))
    modules = len(criterion.hooks.hooks.tap.records)
    assert log["hsic_skipped"] == modules and log["hsic"] == 0.0 and log["hsic_size"] == 0
    assert log["ortho_size"] == sample_size  # SRIP is defined for one row
    assert torch.allclose(loss, log["ce_loss"] + 0.5 * log["ortho"], rtol=1e-5)
    backward_and_check_gradients(model, loss)


def test_cka_alignment_skips_a_batch_without_context(tiny_data):
    task, model, criterion = setup(tiny_data, CKA_ARGS)
    model.train()
    starts = document_starts(task)[:3]
    loss, sample_size, log = criterion(model, batch(task, starts))
    assert log["cka_skipped"] == 1 and log["cka"] == 0.0 and log["cka_size"] == 0
    assert torch.equal(loss, log["ce_loss"])
    backward_and_check_gradients(model, loss)
    model.zero_grad()
    loss, sample_size, log = criterion(model, batch(task, [starts[0], starts[0] + 1, starts[0] + 2]))
    assert log["cka_skipped"] == 0 and 0.0 < log["cka"] / sample_size <= 1.0
    backward_and_check_gradients(model, loss)


def test_skipped_terms_are_counted_and_left_out_of_the_logged_mean(tiny_data):
    task, model, criterion = setup(tiny_data, CKA_ARGS)
    model.eval()
    starts = document_starts(task)
    logs = [criterion(model, batch(task, indices))[2] for indices in ([starts[0]], [starts[0], starts[0] + 1],
                                                                        [starts[1], starts[1] + 1, starts[1] + 2])]
    computed = [log for log in logs if log["cka_skipped"] == 0]
    expected = sum(float(log["cka"]) for log in computed) / sum(log["cka_size"] for log in computed)
    with metrics.aggregate() as aggregator:
        type(criterion).reduce_metrics(logs)
    values = aggregator.get_smoothed_values()
    assert values["cka_skipped"] == 1
    assert values["cka"] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("extra", [HSIC_ARGS, CKA_ARGS], ids=["head_diversity", "cka_alignment"])
def test_half_precision_degenerate_batches_have_float32_terms_and_finite_gradients(tiny_data, extra, dtype):
    task, model, criterion = setup(tiny_data, extra)
    half = copy.deepcopy(model).to(dtype)
    half.train()
    first = document_starts(task)[0]
    for indices in ([first], [first + 1]):
        half.zero_grad()
        loss, _, log = criterion(half, batch(task, indices))
        terms = [key for key in ("hsic", "ortho", "cka") if key in log and log[f"{key}_size"]]
        assert all(log[key].dtype == torch.float32 for key in terms)
        assert torch.isfinite(loss)
        backward_and_check_gradients(half, loss)


@pytest.mark.parametrize("extra", [["--criterion", "head_diversity", "--hsic-lambda", "1e-7"], CKA_ARGS],
                         ids=["head_diversity", "cka_alignment"])
def test_fairseq_train_with_one_sentence_batches_runs_and_counts_skips(tiny_data, tmp_path, extra, caplog):
    with caplog.at_level("INFO"):
        call_tool("fairseq-train", [
            str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
            "--cpu", "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "1", "--max-update", "6", *extra,
            "--seed", "1", "--save-dir", str(tmp_path), "--no-save", "--disable-validation", "--log-format", "json",
            "--log-interval", "1",
        ])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith('{"epoch": 1, "update"')]
    term = "hsic" if "head_diversity" in extra else "cka"
    assert len(lines) >= 6 and all(f'"{term}_skipped"' in line for line in lines)
    assert any(f'"{term}_skipped": "0"' not in line for line in lines)  # some update skipped the term
