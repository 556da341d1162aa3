"""At module level: for every plugin arch with a data fixture, the task's
own criterion on a real batch gives a finite loss and finite gradients in float16 and bfloat16,
close to the float32 loss. (fairseq's --fp16/--bf16 need CUDA; this is the CPU check.)"""
import copy

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from tests.helpers import USER_DIR
from tests.production_matrix import TASK_FIXTURES, arch_params, plugin_archs

RELATIVE_TOLERANCE = {torch.float16: 0.02, torch.bfloat16: 0.05}


def first_batch(data, task_name: str, arch: str):
    fixture = TASK_FIXTURES[task_name]
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=[
        str(data), "--user-dir", USER_DIR, *fixture.task_args, "--arch", arch, *fixture.model_args(arch),
        "--cpu", "--seed", "1", "--max-tokens", "400",
    ])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    iterator = task.get_batch_iterator(dataset=task.dataset("train"), max_tokens=400, seed=1)
    return model, criterion, next(iter(iterator.next_epoch_itr(shuffle=False)))


def cast(sample, dtype: torch.dtype):
    """Floating-point inputs (image features) follow the model's dtype, as fairseq's --fp16 does."""
    if torch.is_tensor(sample):
        return sample.to(dtype) if sample.is_floating_point() else sample
    if isinstance(sample, dict):
        return {key: cast(value, dtype) for key, value in sample.items()}
    if isinstance(sample, list):
        return [cast(value, dtype) for value in sample]
    return sample


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("task,arch", arch_params(plugin_archs(), pytest.mark.full_matrix))
def test_half_precision_loss_and_gradients_are_finite_and_close(task, arch, dtype, request):
    model, criterion, sample = first_batch(request.getfixturevalue(TASK_FIXTURES[task].data_fixture), task, arch)
    model.eval()  # no dropout: the two precisions see the same function
    reference, _, _ = criterion(model, sample)
    half = copy.deepcopy(model).to(dtype)
    loss, _, _ = criterion(half, cast(sample, dtype))
    loss.backward()
    assert torch.isfinite(loss), f"{arch} {dtype}: loss {loss}"
    missing = [name for name, p in half.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == [], f"{arch} {dtype}: no gradient for {missing}"
    assert all(torch.isfinite(p.grad).all() for p in half.parameters() if p.grad is not None), f"{arch} {dtype}"
    assert loss.float().item() == pytest.approx(reference.item(), rel=RELATIVE_TOLERANCE[dtype])
