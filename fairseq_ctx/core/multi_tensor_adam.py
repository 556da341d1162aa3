"""``--optimizer adam_multi_tensor``: fairseq's ``--optimizer adam`` update (Adam, Kingma & Ba,
2015, with decoupled weight decay, Loshchilov & Hutter, 2019) computed with torch's multi-tensor
``torch._foreach_*`` operations, so that the number of operations a step dispatches does not grow
with the number of parameter tensors.

Without apex, fairseq's ``adam`` is ``fairseq.optim.adam.Adam``: a Python loop over the
parameters that dispatches about eight element-wise operations for each (ten for a 16-bit one),
which on a GPU are as many kernel launches; an hmce model launched more kernels in the optimizer
step than in its forward and backward passes together. This optimizer dispatches the same
arithmetic once per group of parameters sharing a device and dtype:

* moments ``m = β1·m + (1 − β1)·g``, ``v = β2·v + (1 − β2)·g²`` (and ``v̂ = max(v̂, v)`` with
  ``amsgrad``, a parameter-group option as in fairseq's class);
* ``denom = sqrt(v) + eps``, ``step_size = lr · sqrt(1 − β2^t) / (1 − β1^t)``;
* decoupled weight decay ``p ← p − weight_decay·lr·p``, then ``p ← p − step_size · m / denom``;
* a float16 or bfloat16 parameter (``--memory-efficient-fp16``) is updated in a float32 working
  copy, its gradient read in float32, and the result rounded back into the parameter, as fairseq
  does; the moments are float32.

Each element sees the same float32 operations in the same order as in fairseq's loop, so on the
CPU the parameters equal fairseq's bit for bit; CUDA's multi-tensor kernels may differ in the
last bit. The state has fairseq's keys (``step`` an int per parameter, ``exp_avg``,
``exp_avg_sq``, ``max_exp_avg_sq``) and the parameter groups fairseq's (``lr``, ``betas``,
``eps``, ``weight_decay``, ``amsgrad``), and the fairseq optimizer's class name is fairseq's
``FairseqAdam`` (the name fairseq-train compares when it resumes), so a checkpoint of either
optimizer resumes with the other, under every precision fairseq has (float32, ``--amp``,
``--fp16`` with its flat float32 master parameters, ``--memory-efficient-fp16``).

The multi-tensor step holds, for the duration of the step, the denominators of a whole group (one
float32 tensor of the group's size) and, for 16-bit parameters, float32 copies of the group's
parameters and gradients, where fairseq's loop holds those of one parameter at a time. The moments
are created on a parameter's first step, one allocation per parameter, as fairseq does.
"""
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from fairseq.optim.adam import FairseqAdam
from omegaconf import II

SIXTEEN_BIT = (torch.float16, torch.bfloat16)


def float32_copies(tensors: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """A float32 copy of each tensor, made by one concatenation and one conversion whatever their
    number: the copies are views into one buffer, each of its tensor's shape."""
    flat = torch.cat([tensor.reshape(-1) for tensor in tensors]).float()
    pieces = flat.split([tensor.numel() for tensor in tensors])
    return [piece.view(tensor.shape) for piece, tensor in zip(pieces, tensors)]


class MultiTensorAdam(torch.optim.Optimizer):
    """fairseq's ``Adam`` (``fairseq.optim.adam.Adam``: Adam with decoupled weight decay, optional
    AMSGrad, float32 moments and working copies for 16-bit parameters) in ``torch._foreach_*``
    operations; the same arguments, parameter groups and state."""

    def __init__(self, params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    @property
    def supports_memory_efficient_fp16(self) -> bool:
        return True

    @property
    def supports_flat_params(self) -> bool:
        return True

    def step(self, closure=None):
        """One update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            buckets: Dict[tuple, List[torch.nn.Parameter]] = defaultdict(list)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
                buckets[(p.device, p.dtype, p.grad.dtype)].append(p)
            for params in buckets.values():
                self._update(group, params)
        return loss

    def _update(self, group: Dict[str, Any], params: List[torch.nn.Parameter]) -> None:
        """The update of ``params``, parameters of ``group`` on one device with one dtype and one
        gradient dtype: a fixed number of multi-tensor operations."""
        amsgrad = group.get("amsgrad", False)
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        data = [p.data for p in params]
        grads = [p.grad.data for p in params]
        if grads[0].dtype in SIXTEEN_BIT:
            grads = float32_copies(grads)
        sixteen_bit = data[0].dtype in SIXTEEN_BIT
        work = float32_copies(data) if sixteen_bit else data
        keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
        moments: Dict[str, List[torch.Tensor]] = {key: [] for key in keys}
        step_sizes = []
        for p, w in zip(params, work):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
            for key in keys:
                if key not in state:
                    state[key] = torch.zeros_like(w)
                elif state[key].dtype != w.dtype or state[key].device != w.device:
                    # a state loaded into 16-bit parameters is cast to their dtype by torch's
                    # load_state_dict; fairseq's Adam takes it back to float32 here too
                    state[key] = state[key].to(w)
                moments[key].append(state[key])
            state["step"] += 1
            bias_correction1 = 1 - beta1 ** state["step"]
            bias_correction2 = 1 - beta2 ** state["step"]
            step_sizes.append(-(lr * math.sqrt(bias_correction2) / bias_correction1))

        exp_avgs, exp_avg_sqs = moments["exp_avg"], moments["exp_avg_sq"]
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        if amsgrad:
            torch._foreach_maximum_(moments["max_exp_avg_sq"], exp_avg_sqs)
            denoms = torch._foreach_sqrt(moments["max_exp_avg_sq"])
        else:
            denoms = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denoms, group["eps"])
        if group["weight_decay"] != 0:
            torch._foreach_add_(work, work, alpha=-group["weight_decay"] * lr)
        if len(set(step_sizes)) == 1:
            torch._foreach_addcdiv_(work, exp_avgs, denoms, value=step_sizes[0])
        else:  # parameters at different steps (one without a gradient at some update)
            torch._foreach_addcdiv_(work, exp_avgs, denoms, step_sizes)
        if sixteen_bit:
            torch._foreach_copy_(data, work)  # fairseq's p.data.copy_(p_data_fp32): rounded to nearest


@dataclass
class MultiTensorAdamConfig(FairseqDataclass):
    adam_betas: Any = field(default=(0.9, 0.999), metadata={"help": "betas for Adam optimizer"})
    adam_eps: float = field(default=1e-8, metadata={"help": "epsilon for Adam optimizer"})
    weight_decay: float = field(
        default=0.0, metadata={"help": "decoupled weight decay: p -= weight_decay * lr * p before the Adam step"})
    lr: List[float] = II("optimization.lr")


@register_optimizer("adam_multi_tensor", dataclass=MultiTensorAdamConfig)
class MultiTensorFairseqAdam(FairseqAdam):
    """``--optimizer adam_multi_tensor``: fairseq's ``adam`` options and state, the step of
    :class:`MultiTensorAdam`. Its ``__name__`` is fairseq's ``FairseqAdam``: fairseq-train records the
    optimizer's class name in a checkpoint and refuses to resume one of another name."""

    def __init__(self, cfg: MultiTensorAdamConfig, params):
        FairseqOptimizer.__init__(self, cfg)
        self._optimizer = MultiTensorAdam(params, **self.optimizer_config)


MultiTensorFairseqAdam.__name__ = FairseqAdam.__name__
