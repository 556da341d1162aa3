"""benchmarks/context_op_count.py: what its counter counts, and the premise of hmce's CPU-only
length chunks (a chunked training step runs more operations than one pass)."""

import pytest
import torch

from tests.helpers import batch_of, build



@pytest.fixture(scope="module")
def counter():
    from benchmarks.context_op_count import OperationCount

    return OperationCount


def test_counts_operations_products_and_host_syncs_not_views(counter):
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    with counter() as count:
        y = (x @ w).t()          # one product; the transpose is a view
        picked = x[x.gt(0)]      # comparison + indexing with a boolean mask (a sync on a GPU)
        total = float(y.sum())   # sum + reading a number (a sync)
    assert (count.operations, count.products, count.syncs) == (5, 1, 2)
    assert picked.numel() == int(x.gt(0).sum()) and total == pytest.approx(float((x @ w).sum()))


def test_hmce_length_chunks_run_more_operations_than_one_pass(tiny_data, counter):
    task, model, cfg = build(tiny_data, "hmce")
    task.load_dataset("train")
    criterion = task.build_criterion(cfg.criterion)
    sample = batch_of(task, "train", list(range(100)))
    model.train()
    counts = []
    for single_pass in (False, True):
        if single_pass:
            model.use_single_pass()
        assert (model.training_chunks(sample["net_input"]["src_tokens"], sample["net_input"]["prev_output_tokens"])
                is None) == single_pass
        with counter() as count:
            criterion(model, sample)[0].backward()
        model.zero_grad()
        counts.append(count)
    chunked, single = counts
    assert chunked.operations > 2 * single.operations and chunked.products > 2 * single.products
