"""fairseq's ``--amp`` on the CPU: bfloat16 mixed precision for the plugin's tasks.

Stock fairseq autocasts only on CUDA (``torch.cuda.amp.autocast`` in ``FairseqTask.train_step``)
and its ``AMPOptimizer`` builds a CUDA gradient scaler that switches itself off without CUDA, so
``fairseq-train --cpu --amp`` silently trains in float32. With the fix ``cpu-mixed-precision``
(:mod:`fairseq_ctx.core.fixes.cpu_mixed_precision`, the trainer's side) and this module (the task's
side, the bfloat16 probe), a CPU run with ``--amp`` of one of the plugin's tasks
(:class:`MixedPrecisionTask`):

* runs the forward pass of every training step and every validation step (the validation loss and
  the ``--eval-bleu`` decoding) under ``torch.autocast("cpu", dtype=torch.bfloat16)``: matrix
  products in bfloat16, which CPUs with AVX512-BF16 or AMX run about twice as fast as float32;
* runs fairseq's attention (``scaled_dot_product_attention``) in training with PyTorch's math
  kernel: its CPU flash-attention backward is 2–4 times slower in bfloat16 than in float32, the
  math kernel in bfloat16 about as fast as flash attention in float32 (same result up to rounding);
* keeps parameters, gradients, optimizer state and checkpoints in float32 (autocast computes on
  bfloat16 copies), and losses and criterion statistics in float32 (fairseq's log-softmax returns
  float32; CKA, HSIC, the distance constraint and the imagination margin switch autocast off);
* gives fairseq's ``AMPOptimizer`` torch's CPU gradient scaler at a constant scale of 1 (bfloat16
  has float32's exponent range, so no gradient underflows): a step whose gradients are not finite
  is skipped and retried as fairseq's ``--amp`` does on CUDA, never applied;
* resumes from a float32 checkpoint, and a float32 run from a ``--amp`` checkpoint: the optimizer
  state is the same, fairseq's check compares only the optimizer's wrapper class.

Every training run logs its precision at start-up; a CPU without native bfloat16 is warned that
``--amp`` will be slower there than float32. On CUDA, ``--amp`` stays fairseq's own.
"""
import os
from typing import Optional

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


CPU_AUTOCAST_DTYPE = torch.bfloat16


# oneDNN instruction-set caps (ONEDNN_MAX_CPU_ISA) that still include bfloat16 products
_BFLOAT16_ISAS = ("ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
                  "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2")


# Set to 1 or 0, it overrides the CPU probe below: the one place where tests (and users) can make
# every precision decision take the branch of a CPU with or without native bfloat16 products.
NATIVE_BFLOAT16_ENV = "FAIRSEQ_CTX_NATIVE_BFLOAT16"


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16 or AMX), and oneDNN is
    allowed to (``ONEDNN_MAX_CPU_ISA`` may cap it below them). Without, a bfloat16 product is
    emulated: on an AMD EPYC with AVX512-BF16, ``--amp`` trained at 0.49x float32's speed with
    oneDNN capped to AVX512_CORE and at 0.07x with AVX2 (benchmarks/cpu_mixed_precision.py).
    The package's one bfloat16 capability probe; :data:`NATIVE_BFLOAT16_ENV` set to 1 or 0 overrides it."""
    forced = os.environ.get(NATIVE_BFLOAT16_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if forced:
        raise ValueError(f"{NATIVE_BFLOAT16_ENV}={forced!r}: set it to 1 (native bfloat16 products) or 0 (none), "
                         "or unset it to probe the CPU")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap and cap not in _BFLOAT16_ISAS:
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


class MixedPrecisionTask:
    """Mixin placed right before fairseq's task class: runs the training and validation forward
    passes under CPU bfloat16 autocast once the trainer has switched it on (:func:`install`)."""

    autocast_dtype: Optional[torch.dtype] = None

    def use_cpu_autocast(self, dtype: torch.dtype) -> None:
        self.autocast_dtype = dtype

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """``FairseqTask.train_step`` with the forward pass under CPU autocast; backward outside it."""
        if self.autocast_dtype is None:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        model.train()
        model.set_num_updates(update_num)
        with torch.autograd.profiler.record_function("forward"):
            with torch.autocast("cpu", dtype=self.autocast_dtype), sdpa_kernel(SDPBackend.MATH):
                loss, sample_size, logging_output = criterion(model, sample)
        if ignore_grad:
            loss *= 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)
        return loss, sample_size, logging_output

    def valid_step(self, sample, model, criterion):
        with torch.autocast("cpu", dtype=self.autocast_dtype or torch.bfloat16, enabled=self.autocast_dtype is not None):
            return super().valid_step(sample, model, criterion)


def describe_precision(common, device: torch.device) -> str:
    """The precision a trainer with fairseq's ``common`` options trains in on ``device``."""
    if common.fp16 or common.memory_efficient_fp16:
        return "float16 (fairseq --fp16)"
    if common.bf16 or common.memory_efficient_bf16:
        return "bfloat16 weights (fairseq --bf16)"
    if common.amp and device.type == "cpu":
        return ("bfloat16 mixed precision on the CPU (--amp): forward passes under bfloat16 autocast; parameters, "
                "gradients, optimizer state, losses and checkpoints float32")
    if common.amp:
        return "mixed precision (fairseq --amp on CUDA)"
    hint = " (add --amp for bfloat16 mixed precision: training 1.4-2 times as fast on CPUs with AVX512-BF16)" if (
        device.type == "cpu" and native_bfloat16()) else ""
    return "float32" + hint
