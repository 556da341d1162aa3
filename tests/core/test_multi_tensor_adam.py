"""--optimizer adam_multi_tensor is fairseq's --optimizer adam computed with multi-tensor operations:
the same parameters after every step (float32 within 1e-6 relative, 16-bit parameters equal),
with AMSGrad, under fairseq's FP16Optimizer (flat float32 master parameters) and
MemoryEfficientFP16Optimizer, checkpoints that resume with either optimizer, the same
fairseq-train run, and a number of dispatched operations per step that does not grow with the
number of parameter tensors."""
import io
import re
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence

import pytest
import torch
from fairseq.optim.adam import Adam
from torch.utils._python_dispatch import TorchDispatchMode

from devtools.in_process_tools import run_tool
from tests.helpers import TINY_MODEL, USER_DIR, build

from fairseq_ctx.core.multi_tensor_adam import MultiTensorAdam, MultiTensorFairseqAdam

SHAPES = [(7,), (3, 5), (4, 2, 3), (1,), (16, 8), (8,), (2, 1, 5), (33,)]
STEPS = 100
RELATIVE = 1e-6
OPTIONS = dict(lr=3e-3, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01)


def make_parameters(dtype: torch.dtype, shapes: Sequence[tuple] = SHAPES, seed: int = 0) -> List[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator).to(dtype)) for shape in shapes]


def set_gradients(params: Sequence[torch.nn.Parameter], step: int) -> None:
    """Seeded gradients of varied scales; every 7th step the first parameter has none (it then
    lags one step behind the others, and the step sizes of a group differ)."""
    generator = torch.Generator().manual_seed(1000 + step)
    for index, p in enumerate(params):
        grad = torch.randn(p.shape, generator=generator) * 10.0 ** (index % 4 - 2)
        p.grad = None if (index == 0 and step % 7 == 3) else grad.to(p.dtype)


def scheduled_lr(step: int) -> float:
    return OPTIONS["lr"] * min(1.0, (step + 1) / 10) / (1 + step / 50)


def run(kind, params, steps: range, options: Optional[dict] = None, state: Optional[dict] = None,
        trace: Optional[list] = None):
    optimizer = kind(params, **(options or OPTIONS))
    if state is not None:
        optimizer.load_state_dict(state)
    for step in steps:
        set_gradients(params, step)
        for group in optimizer.param_groups:
            group["lr"] = scheduled_lr(step)
        optimizer.step()
        if trace is not None:
            trace.append([p.detach().clone() for p in params])
    return optimizer


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a.double() - b.double()).abs() / b.double().abs().clamp_min(1e-12)).max())


@pytest.mark.parametrize("amsgrad", [False, True])
def test_float32_parameters_follow_fairseqs_adam_for_100_steps(amsgrad):
    options = {**OPTIONS, "amsgrad": amsgrad}
    traces = {}
    for kind in (Adam, MultiTensorAdam):
        traces[kind] = []
        run(kind, make_parameters(torch.float32), range(STEPS), options, trace=traces[kind])
    worst = max(relative_difference(ours, theirs) for step_ours, step_theirs in zip(traces[MultiTensorAdam], traces[Adam])
                for ours, theirs in zip(step_ours, step_theirs))
    assert len(traces[MultiTensorAdam]) == STEPS
    assert worst <= RELATIVE
    if not torch.cuda.is_available():  # the same float32 operations per element, in the same order
        assert worst == 0.0
    start = make_parameters(torch.float32)
    assert all((a - b).abs().max() > 1e-3 for a, b in zip(traces[Adam][-1], start))  # the parameters did move


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_parameters_equal_fairseqs_adam_for_100_steps(dtype, amsgrad):
    """The memory-efficient path: float32 working copies and moments, the result rounded back."""
    options = {**OPTIONS, "amsgrad": amsgrad}
    optimizers, traces = {}, {}
    for kind in (Adam, MultiTensorAdam):
        traces[kind] = []
        optimizers[kind] = run(kind, make_parameters(dtype), range(STEPS), options, trace=traces[kind])
    for step_ours, step_theirs in zip(traces[MultiTensorAdam], traces[Adam]):
        assert all(ours.dtype == dtype and torch.equal(ours, theirs) for ours, theirs in zip(step_ours, step_theirs))
    theirs, ours = (optimizers[kind].state_dict()["state"] for kind in (Adam, MultiTensorAdam))
    assert theirs.keys() == ours.keys()
    for index in theirs:
        assert theirs[index].keys() == ours[index].keys()
        assert theirs[index]["step"] == ours[index]["step"] and isinstance(ours[index]["step"], int)
        for key in theirs[index].keys() - {"step"}:
            assert ours[index][key].dtype == torch.float32 and torch.equal(ours[index][key], theirs[index][key])


def saved_and_loaded(optimizer) -> dict:
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer)


def interrupted_run(first, second, dtype: torch.dtype):
    """Steps 0-39 with ``first``, its state_dict saved and loaded into ``second``, steps 40-79 there."""
    params = make_parameters(dtype)
    before = run(first, params, range(40), {**OPTIONS, "amsgrad": True})
    return params, run(second, params, range(40, 80), {**OPTIONS, "amsgrad": True}, state=saved_and_loaded(before))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("first, second", [(Adam, MultiTensorAdam), (MultiTensorAdam, Adam)])
def test_a_state_of_either_optimizer_continues_in_the_other(first, second, dtype):
    """The same parameters and state as fairseq's Adam interrupted and resumed alike (for 16-bit
    parameters torch's load_state_dict rounds the moments to the parameters' dtype, for either
    optimizer); for float32, as 80 uninterrupted steps of fairseq's Adam."""
    reference_params, reference = interrupted_run(Adam, Adam, dtype)
    params, after = interrupted_run(first, second, dtype)
    for ours, theirs in zip(params, reference_params):
        assert relative_difference(ours.detach(), theirs.detach()) <= RELATIVE
        if dtype != torch.float32:
            assert torch.equal(ours, theirs)
    if dtype == torch.float32:
        uninterrupted = make_parameters(dtype)
        run(Adam, uninterrupted, range(80), {**OPTIONS, "amsgrad": True})
        assert all(torch.equal(a, b) for a, b in zip(reference_params, uninterrupted))
    state, reference_state = after.state_dict(), reference.state_dict()
    assert state["param_groups"] == reference_state["param_groups"]
    assert state["state"].keys() == reference_state["state"].keys()
    for index, entry in reference_state["state"].items():
        assert state["state"][index].keys() == entry.keys() and state["state"][index]["step"] == entry["step"]
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert relative_difference(state["state"][index][key], entry[key]) <= RELATIVE


# fairseq's optimizer wrappers --------------------------------------------------------------------

def wrapped_run(data_dir: Path, optimizer: str, precision: Sequence[str], updates: int = 20):
    """fairseq's optimizer for ``precision`` (as its Trainer builds it) over a tiny hmce model's
    parameters, ``updates`` steps of its backward, step and zero_grad on a loss with seeded
    gradients: the model's parameters after each."""
    from fairseq import optim

    task, model, cfg = build(data_dir, "hmce", ["--optimizer", optimizer, "--lr", "1e-3", "--weight-decay", "0.01",
                                                 *precision])
    if "--fp16" in precision:
        model = model.half()
    params = [p for p in model.parameters() if p.requires_grad]
    if "--memory-efficient-fp16" in precision:
        wrapper = optim.MemoryEfficientFP16Optimizer.build_optimizer(cfg, params)
    elif "--fp16" in precision:
        wrapper = optim.FP16Optimizer.build_optimizer(cfg, params)
    else:
        wrapper = optim.build_optimizer(cfg.optimizer, params)
    trace = []
    for step in range(updates):
        generator = torch.Generator().manual_seed(1000 + step)
        loss = sum((p.float() * torch.randn(p.shape, generator=generator) * 10.0 ** (index % 4 - 2)).sum()
                   for index, p in enumerate(params))
        wrapper.backward(loss)  # scaled by the loss scale under --fp16
        wrapper.step()
        wrapper.zero_grad()
        trace.append([p.detach().clone() for p in params])
    return wrapper, trace


@pytest.mark.parametrize("precision", [(), ("--fp16",), ("--fp16", "--fp16-no-flatten-grads"),
                                       ("--fp16", "--memory-efficient-fp16")])
def test_fairseqs_precision_wrappers_give_adams_parameters(tiny_data, precision, monkeypatch):
    """On the CPU: FP16Optimizer keys its flat float32 copy by ``torch.cuda.current_device()``, which
    for the CPU parameters (``device.index`` None) is None."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)
    runs = {name: wrapped_run(tiny_data, name, precision) for name in ("adam", "adam_multi_tensor")}
    (wrapper, trace), (reference, reference_trace) = runs["adam_multi_tensor"], runs["adam"]
    inner = getattr(wrapper, "fp32_optimizer", getattr(wrapper, "wrapped_optimizer", wrapper))
    assert isinstance(inner, MultiTensorFairseqAdam) and isinstance(inner.optimizer, MultiTensorAdam)
    assert type(wrapper).__name__ == type(reference).__name__  # the name fairseq-train's resume compares
    flat = "--fp16" in precision and not {"--fp16-no-flatten-grads", "--memory-efficient-fp16"} & set(precision)
    assert getattr(wrapper, "has_flat_params", False) == flat
    for step_ours, step_theirs in zip(trace, reference_trace):
        assert all(relative_difference(a, b) <= RELATIVE for a, b in zip(step_ours, step_theirs))
    assert len(trace) == 20


# fairseq-train -------------------------------------------------------------------------------------

def train(data_dir: Path, save_dir: Path, optimizer: str, updates: int, log: Path, extra: Sequence[str] = ()):
    """fairseq-train of a tiny hmce with ``optimizer`` to ``updates`` updates: {update: loss} and the
    weights of checkpoint_last.pt."""
    printed = run_tool("fairseq-train", [
        str(data_dir), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
        "--cpu", "--seed", "1", "--optimizer", optimizer, "--adam-betas", "(0.9,0.98)", "--weight-decay", "0.01",
        "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4", "--max-tokens", "400",
        "--max-update", str(updates), "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--dropout", "0.0", "--num-workers", "0", "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--disable-validation", "--log-format", "simple", "--log-interval", "1", *extra], log)
    losses = {}
    for line in (printed + log.read_text(encoding="utf-8")).splitlines():
        match = re.search(r"\| train_inner \|.*? loss[= ](\d+\.\d+).*? num_updates[= ](\d+)", line)
        if match:
            losses[int(match.group(2))] = float(match.group(1))
    from fairseq_ctx.core.fixes.checkpoint_allow_list import fairseq_checkpoint_globals

    with torch.serialization.safe_globals(fairseq_checkpoint_globals()):
        checkpoint = torch.load(save_dir / "checkpoint_last.pt", weights_only=True)
    return losses, checkpoint


def assert_same_training(ours, theirs, updates: range):
    (losses, checkpoint), (reference_losses, reference) = ours, theirs
    assert sorted(losses) == sorted(reference_losses) == list(updates)
    assert all(abs(losses[u] - reference_losses[u]) <= 1e-4 * abs(reference_losses[u]) for u in updates)
    assert checkpoint["model"].keys() == reference["model"].keys()
    assert all(relative_difference(checkpoint["model"][k], reference["model"][k]) <= 1e-5 for k in reference["model"])
    assert checkpoint["optimizer_history"][-1]["optimizer_name"] == reference["optimizer_history"][-1]["optimizer_name"]
    state, reference_state = (c["last_optimizer_state"] for c in (checkpoint, reference))
    assert state["param_groups"] == reference_state["param_groups"]
    assert state["state"].keys() == reference_state["state"].keys()
    for index, entry in reference_state["state"].items():
        assert state["state"][index]["step"] == entry["step"]
        assert all(relative_difference(state["state"][index][key], entry[key]) <= 1e-5
                   for key in ("exp_avg", "exp_avg_sq"))


@pytest.mark.parametrize("precision", [(), ("--amp",)])
def test_fairseq_train_with_the_plugins_adam_logs_and_saves_fairseqs_and_resumes_across_the_two(
        tiny_data, tmp_path, precision):
    """6 updates with either optimizer; 3 with one and 3 more resumed with the other, both ways:
    the same losses, weights and optimizer state (float32, and --amp: bfloat16 autocast on the CPU)."""
    runs = {name: train(tiny_data, tmp_path / name, name, 6, tmp_path / f"{name}.log", precision)
            for name in ("adam", "adam_multi_tensor")}
    assert "'_name': 'adam_multi_tensor'" in (tmp_path / "adam_multi_tensor.log").read_text(encoding="utf-8")
    assert_same_training(runs["adam_multi_tensor"], runs["adam"], range(1, 7))
    assert len(set(runs["adam"][0].values())) == 6  # the loss does change
    for first, second in (("adam", "adam_multi_tensor"), ("adam_multi_tensor", "adam")):
        save_dir = tmp_path / f"{first}-then-{second}"
        half = train(tiny_data, save_dir, first, 3, tmp_path / f"{first}-{second}-1.log", precision)
        resumed = train(tiny_data, save_dir, second, 6, tmp_path / f"{first}-{second}-2.log", precision)
        assert "Loaded checkpoint" in (tmp_path / f"{first}-{second}-2.log").read_text(encoding="utf-8")
        assert sorted(half[0]) == [1, 2, 3] and sorted(resumed[0]) == [4, 5, 6]
        assert_same_training(({**half[0], **resumed[0]}, resumed[1]), runs["adam"], range(1, 7))


# operations dispatched per step ---------------------------------------------------------------------

class OperationCount(TorchDispatchMode):
    """The aten operations dispatched that compute (the operations a GPU launches kernels for), by
    name: views (``.data``'s detach, view, split) and the profiler's markers are left out; an
    operation that runs others inside it counts once."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten" and not func.is_view:
            self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def operations_per_step(kind, tensors: int, dtype: torch.dtype = torch.float32) -> Counter:
    """The operations of the second step (the first also creates the moments) over ``tensors``
    parameters of varied shapes."""
    params = make_parameters(dtype, [SHAPES[i % len(SHAPES)] for i in range(tensors)])
    optimizer = run(kind, params, range(1))
    set_gradients(params, 1)
    with OperationCount() as count:
        optimizer.step()
    return count.counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_operations_per_step_do_not_grow_with_the_number_of_parameters(dtype):
    ours = {n: sum(operations_per_step(MultiTensorAdam, n, dtype).values()) for n in (10, 50, 100)}
    theirs = {n: sum(operations_per_step(Adam, n, dtype).values()) for n in (10, 50, 100)}
    assert len(set(ours.values())) == 1
    per_tensor = (theirs[100] - theirs[10]) / 90
    assert per_tensor >= 8 and theirs[50] == theirs[10] + 40 * per_tensor
    print(f"\n{dtype}: operations per step over 10/50/100 parameter tensors: fairseq adam "
          f"{theirs[10]}/{theirs[50]}/{theirs[100]}, adam_multi_tensor {ours[10]}/{ours[50]}/{ours[100]}; "
          f"ratio at 100 tensors {theirs[100] / ours[100]:.1f}")
    assert theirs[100] / ours[100] >= 50


def test_operations_per_step_of_an_hmce_model(tiny_data):
    """A tiny hmce (its parameter tensors as fairseq-train's Trainer hands them to the optimizer)."""
    _, model, _ = build(tiny_data, "hmce")
    params = [p for p in model.parameters() if p.requires_grad]
    counts = {}
    for kind in (Adam, MultiTensorAdam):
        copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
        optimizer = kind(copies, **OPTIONS)
        for step in range(2):
            for p in copies:
                p.grad = torch.full_like(p, 0.01 * (step + 1))
            with OperationCount() as count:
                optimizer.step()
        counts[kind] = sum(count.counts.values())
    print(f"\nhmce ({len(params)} parameter tensors): operations per step fairseq adam {counts[Adam]}, "
          f"adam_multi_tensor {counts[MultiTensorAdam]}, ratio {counts[Adam] / counts[MultiTensorAdam]:.1f}")
    assert counts[Adam] == 8 * len(params) and counts[MultiTensorAdam] == 8
