"""benchmarks/context_op_count.py: what its counter counts (operations that launch a kernel,
in-place ones included; host syncs only for tensors that a GPU run keeps on the device), and the
premise of hmce's CPU-only length chunks (a chunked training step runs more operations than one
pass)."""

import pytest
import torch

from tests.helpers import batch_of, build


@pytest.fixture(scope="module")
def counter():
    from benchmarks.context_op_count import OperationCount

    return OperationCount


def test_counts_operations_products_and_host_syncs_not_views(counter):
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    with counter([x, w]) as count:
        y = (x @ w).t()          # one product; the transpose is a view
        picked = x[x.gt(0)]      # comparison + indexing with a boolean mask (a sync on a GPU)
        total = float(y.sum())   # sum + reading a number (a sync)
    assert (count.operations, count.products, count.syncs) == (5, 1, 2)
    assert picked.numel() == int(x.gt(0).sum()) and total == pytest.approx(float((x @ w).sum()))



def test_in_place_operations_count_and_views_do_not(counter):
    x = torch.randn(3, 4)
    with counter(x) as count:
        x.add_(1)                      # in-place: returns Tensor(a!), one kernel
    assert count.operations == 1
    with counter(x) as count:
        x.view(4, 3).t()[0]            # views only
    assert count.operations == 0
    with counter(x) as count:
        torch.mul(x, 2, out=x)         # out= variant
        x.masked_fill_(x.gt(0), 0.0)   # comparison + in-place fill
        x[0] = 1.0                     # select (view) + fill_ (in place)
    assert count.operations == 4
    with counter() as count:
        torch._foreach_add_([x, x], 1)  # returns nothing, still launches kernels
    assert count.operations == 1


def test_host_syncs_only_for_device_resident_tensors(counter):
    weight, lengths = torch.randn(4), torch.tensor([3, 2])
    with counter(torch.nn.Linear(2, 2), {"net_input": {"src_lengths": lengths}, "ntokens": 5}) as count:
        int(torch.tensor(3))           # built from a Python int: a read (one operation), no sync
        shape = torch.tensor([weight.size(0), 2])
        int(shape.max())               # a shape tensor: max + a free read
        positions = torch.arange(4)    # a factory given no device-resident tensor
        positions.nonzero()
        positions[positions.gt(1)]     # boolean mask on the host: gt + index, no sync
    assert (count.operations, count.syncs) == (7, 0)
    with counter({"net_input": {"src_lengths": lengths}}) as count:
        lengths.max().item()           # the batch's tensor: max + a sync
        longest = lengths.add(positions[:2])  # computed from a device-resident tensor...
        bool(longest.gt(0).all())      # ...so reading it syncs
    assert (count.operations, count.syncs) == (6, 2)
    assert count.is_device_resident(longest) and not count.is_device_resident(positions)


def test_host_copies_of_device_tensors_are_syncs(counter):
    lengths, host = torch.tensor([3, 2]), torch.tensor([1, 2])
    with counter({"net_input": {"src_lengths": lengths}}) as count:
        lengths.tolist()               # no operation on the CPU, a sync on a GPU
        lengths.add(1).cpu()
        lengths.numpy()
        host.tolist()                  # a host tensor: free
    assert (count.operations, count.syncs) == (1, 3)


def test_in_place_write_and_boolean_mask_indexing_of_device_tensors(counter):
    x, host = torch.randn(5), torch.zeros(5)
    with counter(x) as count:
        x.add_(1)                      # counts: an in-place operation on a device-resident tensor
        picked = x[x.gt(0)]            # gt + index with a device-resident mask: a sync
        host.copy_(x)                  # written from a device-resident tensor: device-resident now
        host.sum().item()              # sum + a sync
        y = x.clone()
        y[y.lt(0)] = 0.0               # lt + index_put_ with a device-resident mask: a sync
    assert (count.operations, count.syncs) == (9, 3)
    assert count.is_device_resident(host) and count.is_device_resident(picked)


def test_backward_keeps_the_parameters_marks(counter):
    model, batch = torch.nn.Linear(4, 3), torch.randn(2, 4)
    with counter(model) as count:
        model(batch).square().sum().backward()
        grad_read = model.weight.grad.abs().max().item()   # abs + max + a sync
    assert count.syncs == 1 and grad_read > 0
    assert all(count.is_device_resident(p.grad) for p in model.parameters())
    assert not count.is_device_resident(batch)


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
        with counter(model, sample) as count:
            criterion(model, sample)[0].backward()
        model.zero_grad()
        counts.append(count)
    chunked, single = counts
    assert chunked.operations > 2 * single.operations and chunked.products > 2 * single.products
