"""The fix ``cpu-mixed-precision``, the trainer's side of ``--amp`` on the CPU
(:mod:`fairseq_ctx.core.mixed_precision` has the task's side and the reasons): fairseq's
``Trainer.__init__`` refuses ``--bf16`` without torch_xla, logs the training precision and turns on
the task's bfloat16 autocast; ``Trainer._build_optimizer`` gives fairseq's ``AMPOptimizer`` torch's
CPU gradient scaler and lets float32 and ``--amp`` checkpoints resume into each other."""
import importlib.util
import logging

import torch
from fairseq.optim import FP16Optimizer, MemoryEfficientFP16Optimizer
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.trainer import Trainer

from fairseq_ctx.core.fixes.attribution import spoken_by
from fairseq_ctx.core.mixed_precision import CPU_AUTOCAST_DTYPE, MixedPrecisionTask, describe_precision, native_bfloat16

logger = logging.getLogger(__name__)

# The scale never grows (bfloat16 needs no loss scaling); it only halves after a non-finite step, so
# fairseq's --min-loss-scale still stops a run whose gradients stay non-finite.
_NEVER = 2 ** 31 - 1


def _init(original, trainer: Trainer, cfg, task, *args, **kwargs) -> None:
    common = cfg.common
    if (common.bf16 or common.memory_efficient_bf16) and importlib.util.find_spec("torch_xla") is None:
        raise ValueError(f"--bf16 on the {'CPU' if common.cpu or not torch.cuda.is_available() else 'GPU'}: in fairseq "
                         "that option means bfloat16 weights on a TPU (it implies --tpu and needs torch_xla, which is "
                         "not installed), and fairseq fails inside ('NoneType' object has no attribute 'xla_device'). "
                         "For bfloat16 mixed precision use --amp instead (float32 weights, bfloat16 forward passes; "
                         "on the CPU too)" + spoken_by("cpu-mixed-precision"))
    original(trainer, cfg, task, *args, **kwargs)
    logger.info(f"training precision: {describe_precision(cfg.common, trainer.device)}")
    if not (cfg.common.amp and trainer.device.type == "cpu" and isinstance(task, MixedPrecisionTask)):
        return
    if not native_bfloat16():
        logger.warning("--amp on a CPU without native bfloat16 (no AVX512-BF16 or AMX, or ONEDNN_MAX_CPU_ISA below "
                       "them): bfloat16 matrix products are emulated and training will be slower than in float32 "
                       "(measured 0.07-0.5x); leave --amp out on this machine")
    task.use_cpu_autocast(CPU_AUTOCAST_DTYPE)


def _build_optimizer(original, trainer: Trainer) -> None:
    original(trainer)
    optimizer = trainer._optimizer
    if isinstance(optimizer, AMPOptimizer) and trainer.device.type == "cpu":
        optimizer._grad_scaler = torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=_NEVER)
    history = trainer._optim_history
    if history:
        _accept_other_precision(history, optimizer)


def _accept_other_precision(history: list, optimizer) -> None:
    """Let fairseq restore the optimizer state of a float32 run into a --amp run and back: its
    check compares class names, and AMPOptimizer only wraps the float32 optimizer whose state it saves."""
    saved, current = history[-1]["optimizer_name"], type(optimizer).__name__
    if saved == current or isinstance(optimizer, (FP16Optimizer, MemoryEfficientFP16Optimizer)):
        return
    amp_to_float32 = saved == AMPOptimizer.__name__
    float32_to_amp = isinstance(optimizer, AMPOptimizer) and saved == type(optimizer.fp32_optimizer).__name__
    if amp_to_float32 or float32_to_amp:
        logger.info(f"resuming a {'--amp' if amp_to_float32 else 'float32'} checkpoint "
                    f"({saved}) with {current}: the optimizer state carries over")
        history[-1] = {**history[-1], "optimizer_name": current}

