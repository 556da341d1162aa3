"""fairseq's ``--amp`` on the CPU is bfloat16 mixed precision for the plugin's tasks: every arch trains
under it through fairseq's own Trainer (forward in bfloat16, loss finite and falling on a batch
trained repeatedly, every
parameter with a gradient on every update, close to the float32 run), training logs its precision,
float32 and --amp checkpoints resume into each other, a step with non-finite gradients is skipped
instead of applied, and losses and statistics stay float32 under autocast."""
import logging
import math
import os
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer

from tests.helpers import run_tool, tool
from tests.production_matrix import TASK_FIXTURES, per_update, plugin_archs, task_of, train_args

from fairseq_ctx.analysis.cka import cka, hsic, mean_pairwise_linear_hsic, pairwise_linear_hsic, srip
from fairseq_ctx.embedding.float32_recurrence import float32_recurrence
from fairseq_ctx.core.mixed_precision import NATIVE_BFLOAT16_ENV, describe_precision, native_bfloat16
from fairseq_ctx.embedding.distance_constraint import cnv_distance_terms, mde_distance_terms

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)

UPDATES = 8
FIRST_LOSS_TOLERANCE = 0.05  # relative, --amp vs float32 loss of the first update (same weights, same batch)


def build_trainer(data: Path, task_name: str, arch: str, amp: bool, tmp_path: Path) -> Trainer:
    argv = train_args(data, task_name, arch, tmp_path, UPDATES, ["--dropout", "0.0", *(["--amp"] if amp else [])])
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), input_args=argv))
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    task.load_dataset("train")
    return trainer


def train_batches(trainer: Trainer, count: int) -> List[dict]:
    task = trainer.task
    iterator = task.get_batch_iterator(
        dataset=task.dataset("train"), max_tokens=trainer.cfg.dataset.max_tokens,
        max_positions=utils.resolve_max_positions(task.max_positions(), trainer.model.max_positions()), seed=1,
    ).next_epoch_itr(shuffle=True)
    return [batch for batch, _ in zip(iterator, range(count))]


def bfloat16_linear_outputs(model: torch.nn.Module) -> Dict[str, torch.dtype]:
    """Hooks recording the output dtype of every nn.Linear of ``model`` (name → dtype)."""
    seen: Dict[str, torch.dtype] = {}

    def record(name: str, output: torch.Tensor) -> None:
        seen.setdefault(name, output.dtype)

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, i, out, name=name: record(name, out))
    return seen


@pytest.mark.parametrize("arch", plugin_archs())
def test_every_arch_trains_under_amp_in_bfloat16(arch, request, tmp_path):
    task_name = task_of(arch)
    data = request.getfixturevalue(TASK_FIXTURES[task_name].data_fixture)
    trainers = {amp: build_trainer(data, task_name, arch, amp, tmp_path / str(amp)) for amp in (False, True)}
    assert trainers[True].task.autocast_dtype == torch.bfloat16 and trainers[False].task.autocast_dtype is None
    linear_dtypes = bfloat16_linear_outputs(trainers[True].model)
    batch = train_batches(trainers[True], 1)[0]
    losses: Dict[bool, List[float]] = {False: [], True: []}
    for update in range(UPDATES):
        for amp, trainer in trainers.items():
            if not amp and update > 0:
                continue
            log = trainer.train_step([batch])
            losses[amp].append(float(log["loss"]))
            if amp:
                missing = [name for name, p in trainer.model.named_parameters() if p.requires_grad and p.grad is None]
                assert missing == [], (update, missing)
    amp_losses = losses[True]
    assert all(math.isfinite(loss) for loss in amp_losses), amp_losses
    assert sum(amp_losses[-3:]) < sum(amp_losses[:3]), amp_losses
    assert amp_losses[0] == pytest.approx(losses[False][0], rel=FIRST_LOSS_TOLERANCE)
    assert linear_dtypes and set(linear_dtypes.values()) == {torch.bfloat16}, linear_dtypes
    assert all(p.dtype == torch.float32 for p in trainers[True].model.parameters())
    state = trainers[True].optimizer.state_dict()["state"]
    assert state and all(t.dtype == torch.float32 for s in state.values() for t in s.values()
                         if torch.is_tensor(t) and t.is_floating_point())


def test_training_states_its_precision(tiny_data, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="fairseq_ctx.core.fixes.cpu_mixed_precision"):
        for amp in (False, True):
            build_trainer(tiny_data, "context_translation", "hmce", amp, tmp_path / str(amp))
    lines = [r.getMessage() for r in caplog.records if r.name == "fairseq_ctx.core.fixes.cpu_mixed_precision"]
    assert lines[0].startswith("training precision: float32")
    assert lines[1].startswith("training precision: bfloat16 mixed precision on the CPU (--amp)")


@pytest.mark.parametrize("native", [False, True])
def test_a_cpu_without_native_bfloat16_is_warned(native, tiny_data, tmp_path, caplog, monkeypatch):
    monkeypatch.setenv(NATIVE_BFLOAT16_ENV, str(int(native)))
    with caplog.at_level(logging.INFO, logger="fairseq_ctx.core.fixes.cpu_mixed_precision"):
        build_trainer(tiny_data, "context_translation", "hmce", True, tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if native:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith("--amp on a CPU without native bfloat16")


def test_the_one_bfloat16_probe_is_forced_by_its_variable_or_capped_by_onednn(monkeypatch):
    for value, native in (("1", True), ("0", False)):
        monkeypatch.setenv(NATIVE_BFLOAT16_ENV, value)
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # the variable wins over the probe
        assert native_bfloat16() is native
    monkeypatch.delenv(NATIVE_BFLOAT16_ENV)
    assert native_bfloat16() is False  # oneDNN capped below bfloat16 products: none, whatever the CPU
    monkeypatch.setenv(NATIVE_BFLOAT16_ENV, "yes")
    with pytest.raises(ValueError, match=f"{NATIVE_BFLOAT16_ENV}='yes': set it to 1 .* or 0"):
        native_bfloat16()


def test_precision_descriptions_of_fairseq_options():
    from omegaconf import OmegaConf

    def common(**flags):
        return OmegaConf.create({"fp16": False, "memory_efficient_fp16": False, "bf16": False,
                                 "memory_efficient_bf16": False, "amp": False, **flags})

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert describe_precision(common(fp16=True), cuda) == "float16 (fairseq --fp16)"
    assert describe_precision(common(amp=True), cuda) == "mixed precision (fairseq --amp on CUDA)"
    assert describe_precision(common(amp=True), cpu).startswith("bfloat16 mixed precision on the CPU")
    assert describe_precision(common(), cpu).startswith("float32")


def _fairseq_train(data: Path, save_dir: Path, updates: int, amp: bool) -> str:
    args = train_args(data, "context_translation", "hmce", save_dir, updates) + (["--amp"] if amp else [])
    result = run_tool(["fairseq-train", *args])
    return result.stdout + result.stderr


def test_float32_and_amp_checkpoints_resume_into_each_other(tiny_data, tmp_path):
    from fairseq import checkpoint_utils

    save = tmp_path / "run"
    logs = [_fairseq_train(tiny_data, save, 2, amp=False), _fairseq_train(tiny_data, save, 4, amp=True),
            _fairseq_train(tiny_data, save, 6, amp=False)]
    assert "resuming a float32 checkpoint (FairseqAdam) with AMPOptimizer" in logs[1]
    assert "resuming a --amp checkpoint (AMPOptimizer) with FairseqAdam" in logs[2]
    assert [sorted(per_update(log)) for log in logs] == [[1, 2], [3, 4], [5, 6]]
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))
    assert state["optimizer_history"][-1]["num_updates"] == 6
    assert {t.dtype for t in state["model"].values() if t.is_floating_point()} == {torch.float32}


def test_non_finite_gradients_skip_the_update_instead_of_applying_it(tiny_data, tmp_path, caplog):
    trainer = build_trainer(tiny_data, "context_translation", "hmce", True, tmp_path)
    batch = train_batches(trainer, 1)[0]
    trainer.train_step([batch])
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    poisoned = next(p for p in trainer.model.parameters() if p.requires_grad)
    handle = poisoned.register_hook(lambda grad: grad * float("inf"))
    with caplog.at_level(logging.INFO):
        trainer.train_step([batch])
    handle.remove()
    assert "AMP: skipping this batch." in caplog.text
    assert all(torch.equal(before[name], p) for name, p in trainer.model.named_parameters())
    trainer.train_step([batch])
    assert not all(torch.equal(before[name], p) for name, p in trainer.model.named_parameters())


STATISTICS = {
    "cka": lambda x, y: cka(x, y),
    "hsic": lambda x, y: hsic(x, y),
    "rbf cka": lambda x, y: cka(x, y, kernel="rbf"),
    "pairwise hsic": lambda x, y: pairwise_linear_hsic(x.view(32, 4, 4)),
    "mean pairwise hsic": lambda x, y: mean_pairwise_linear_hsic(x.view(32, 4, 4)),
    "srip": lambda x, y: srip(x),
    "mde distance": lambda x, y: mde_distance_terms(x, y, torch.arange(1, 33).remainder(32).view(32, 1), 0.5,
                                                    1e-6)["delta"],
    "cnv distance": lambda x, y: cnv_distance_terms(x, y, torch.arange(1, 33).remainder(32).view(32, 1), 0.5)["delta"],
}


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_statistics_stay_float32_under_autocast(name):
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(32, 16, generator=generator) * 30 for _ in range(2))
    exact = STATISTICS[name](x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = STATISTICS[name](x.bfloat16(), y.bfloat16())
    assert mixed.dtype == torch.float32
    assert torch.equal(mixed, STATISTICS[name](x.bfloat16().float(), y.bfloat16().float()))
    assert torch.allclose(mixed, exact, rtol=0.05, atol=1e-3)


@pytest.mark.parametrize("arch", ["laser_bilstm", "multisource_rnn"])
def test_recurrent_archs_train_under_amp_on_a_cpu_without_a_bfloat16_lstm(arch, request, tmp_path):
    """fairseq-train --cpu --amp of a recurrent arch on a CPU whose oneDNN has no bfloat16 LSTM
    (capped to AVX2, as on CPUs without AVX512-BF16 and AMX): it trained into "could not create a
    primitive descriptor for the LSTM forward propagation primitive"; the recurrences now run in
    float32 there, and the loss is finite and close to the float32 run's."""
    task_name = task_of(arch)
    data = request.getfixturevalue(TASK_FIXTURES[task_name].data_fixture)
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    env.pop(NATIVE_BFLOAT16_ENV)  # the CPU probe itself sees oneDNN's cap
    losses = {}
    for amp in (False, True):
        args = train_args(data, task_name, arch, tmp_path / str(amp), 2, ["--dropout", "0.0", *(["--amp"] * amp)])
        result = subprocess.run([tool("fairseq-train"), *args], capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        losses[amp] = per_update(result.stdout + result.stderr)
    assert sorted(losses[True]) == [1, 2] and all(math.isfinite(loss) for loss in losses[True].values())
    assert losses[True][1] == pytest.approx(losses[False][1], rel=FIRST_LOSS_TOLERANCE)


def test_recurrences_keep_bfloat16_where_the_cpu_has_it(monkeypatch):
    """The float32 recurrence switches CPU autocast off only where the probe finds no native bfloat16."""
    for native, autocast_inside in (("1", True), ("0", False)):
        monkeypatch.setenv(NATIVE_BFLOAT16_ENV, native)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with float32_recurrence(torch.device("cpu")):
                assert torch.is_autocast_enabled("cpu") is autocast_inside
    with float32_recurrence(torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")
