"""``--criterion fused_label_smoothed_cross_entropy``: fairseq's label-smoothed cross-entropy
(Szegedy et al., 2016; fairseq's ``label_smoothed_cross_entropy``, the same options and logged
values), computed from the logits without the log-probabilities over the whole vocabulary.

With log-probabilities ``l = x − logsumexp(x)`` over V words, fairseq's loss per target word t is
``(1 − ε − ε_i)·(−l_t) + ε_i·(−Σ_v l_v)`` with ``ε_i = ε / (V − 1)``; that is
``(1 − ε − ε_i)·(lse − x_t) + ε_i·(V·lse − Σ_v x_v)``, and its gradient with respect to the logits
is ``softmax(x) − ε_i − (1 − ε − ε_i)·onehot(t)`` (the coefficients of softmax add up to 1). Both
are computed in float32 from the logits (bfloat16 or float16 under mixed precision), in one
forward pass that keeps only ``lse`` per word and one backward pass, instead of fairseq's
float32 ``log_softmax`` of the logits, its sum, the gather and their backward passes over
[words × V] tensors: on the CPU that path was a third of a training step of the small Multi30k
Transformer (8,000 words, ≈7,000 target words per update). Loss, nll_loss and gradients equal
fairseq's up to float32 rounding (tests/core/test_fused_label_smoothing.py).

A model whose output is not plain logits (an adaptive softmax, a ``get_normalized_probs`` of its
own) is scored by fairseq's own computation, as is ``reduce=False``.
"""
from typing import Tuple

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (LabelSmoothedCrossEntropyCriterion,
                                                              LabelSmoothedCrossEntropyCriterionConfig)
from fairseq.models import BaseFairseqModel, FairseqDecoder
from fairseq.models.transformer import TransformerModelBase


class LabelSmoothedLogitLoss(torch.autograd.Function):
    """Summed label-smoothed loss and nll of ``logits`` (words × V) against ``target`` (words),
    words whose target is ``padding_idx`` left out; float32 arithmetic, gradient in the logits' dtype."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, epsilon: float,
                padding_idx: int) -> Tuple[torch.Tensor, torch.Tensor]:
        words = logits.float()
        vocabulary = words.size(-1)
        eps_i = epsilon / (vocabulary - 1)
        keep = target.ne(padding_idx)
        lse = torch.logsumexp(words, dim=-1)
        nll = (lse - words.gather(-1, target.unsqueeze(-1)).squeeze(-1)) * keep
        smooth = (vocabulary * lse - words.sum(-1)) * keep
        ctx.save_for_backward(logits, target, lse, keep)
        ctx.epsilon = epsilon
        nll_sum = nll.sum()
        return (1.0 - epsilon - eps_i) * nll_sum + eps_i * smooth.sum(), nll_sum

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, grad_nll: torch.Tensor):
        logits, target, lse, keep = ctx.saved_tensors
        vocabulary = logits.size(-1)
        eps_i = ctx.epsilon / (vocabulary - 1)
        target_weight = (1.0 - ctx.epsilon - eps_i) * grad_loss + grad_nll
        grad = torch.exp(logits.float() - lse.unsqueeze(-1))  # softmax
        grad.mul_(grad_loss + grad_nll).sub_(eps_i * grad_loss)
        grad.scatter_add_(-1, target.unsqueeze(-1), (-target_weight).expand(target.size()).unsqueeze(-1).float())
        grad.mul_(keep.unsqueeze(-1))
        return grad.to(logits.dtype), None, None, None


def scores_plain_logits(model) -> bool:
    """Whether fairseq's log-probabilities of ``model`` are the log-softmax of its first output."""
    decoder = getattr(model, "decoder", None)
    return (isinstance(decoder, FairseqDecoder) and getattr(decoder, "adaptive_softmax", None) is None
            and type(model).get_normalized_probs in (BaseFairseqModel.get_normalized_probs,
                                                     TransformerModelBase.get_normalized_probs)
            and type(model).get_normalized_probs_scriptable is BaseFairseqModel.get_normalized_probs_scriptable
            and type(decoder).get_normalized_probs_scriptable is FairseqDecoder.get_normalized_probs_scriptable)


@register_criterion("fused_label_smoothed_cross_entropy", dataclass=LabelSmoothedCrossEntropyCriterionConfig)
class FusedLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    """fairseq's ``label_smoothed_cross_entropy`` computed from the logits (module docstring)."""

    def compute_loss(self, model, net_output, sample, reduce: bool = True):
        if not reduce or not scores_plain_logits(model):
            return super().compute_loss(model, net_output, sample, reduce=reduce)
        logits, target = net_output[0], model.get_targets(sample, net_output)
        if self.ignore_prefix_size > 0:
            logits, target = logits[:, self.ignore_prefix_size:, :], target[:, self.ignore_prefix_size:]
        return LabelSmoothedLogitLoss.apply(logits.reshape(-1, logits.size(-1)), target.reshape(-1), self.eps,
                                            self.padding_idx)
