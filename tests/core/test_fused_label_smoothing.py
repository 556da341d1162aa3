"""--criterion fused_label_smoothed_cross_entropy gives fairseq's label_smoothed_cross_entropy:
the same loss, nll_loss and logged values, and the same gradients, computed from the logits."""

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

import fairseq_ctx  # noqa: F401  (registers the criterion)
from fairseq_ctx.core.fused_label_smoothing import (FusedLabelSmoothedCrossEntropyCriterion, LabelSmoothedLogitLoss,
                                                    scores_plain_logits)




class Task:
    def __init__(self, dictionary):
        self.target_dictionary = dictionary


def load_benchmark():
    from benchmarks import label_smoothing_speed

    return label_smoothing_speed


def tiny_model_and_sample(seed: int = 0):
    torch.manual_seed(seed)
    model, dictionary = load_benchmark().build(40, dim=16, ffn=32, layers=1, heads=2, dropout=0.0)
    tokens = torch.randint(dictionary.nspecial, len(dictionary), (3, 7))
    target = tokens.clone()
    target[0, 5:] = dictionary.pad()  # padded targets are left out of the loss
    previous = torch.cat([torch.full((3, 1), dictionary.eos()), target[:, :-1]], dim=1)
    sample = {"net_input": {"src_tokens": tokens, "src_lengths": torch.full((3,), 7), "prev_output_tokens": previous},
              "target": target, "ntokens": int(target.ne(dictionary.pad()).sum())}
    return model, sample, dictionary


@pytest.mark.parametrize("prefix", [0, 1])
def test_loss_nll_logging_and_gradients_equal_fairseqs(prefix):
    model, sample, dictionary = tiny_model_and_sample()
    assert scores_plain_logits(model)
    results = []
    for kind in (LabelSmoothedCrossEntropyCriterion, FusedLabelSmoothedCrossEntropyCriterion):
        criterion = kind(Task(dictionary), sentence_avg=False, label_smoothing=0.1, ignore_prefix_size=prefix)
        model.zero_grad()
        loss, size, logging = criterion(model, sample)
        loss.backward()
        results.append((loss.detach(), logging, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (stock_loss, stock_log, stock_grads), (fused_loss, fused_log, fused_grads) = results
    assert fused_loss.dtype == torch.float32
    assert torch.allclose(fused_loss, stock_loss, rtol=1e-6)
    assert float(fused_log["nll_loss"]) == pytest.approx(float(stock_log["nll_loss"]), rel=1e-6)
    assert {k: v for k, v in fused_log.items() if "loss" not in k} == {k: v for k, v in stock_log.items()
                                                                       if "loss" not in k}
    for name, grad in stock_grads.items():
        assert torch.allclose(fused_grads[name], grad, rtol=1e-4, atol=1e-6), name


def test_under_bfloat16_logits_the_loss_is_float32_and_the_gradient_matches_to_bfloat16_rounding():
    torch.manual_seed(1)
    logits = (torch.randn(50, 300) * 4).bfloat16()
    target = torch.randint(0, 300, (50,))
    target[:3] = 1  # padding
    stock = logits.clone().requires_grad_()
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    lprobs = torch.log_softmax(stock, dim=-1, dtype=torch.float32)
    stock_loss, stock_nll = label_smoothed_nll_loss(lprobs, target, 0.1, ignore_index=1)
    stock_loss.backward()
    fused = logits.clone().requires_grad_()
    fused_loss, fused_nll = LabelSmoothedLogitLoss.apply(fused, target, 0.1, 1)
    fused_loss.backward()
    assert fused_loss.dtype == torch.float32 and fused.grad.dtype == torch.bfloat16
    assert fused_loss.item() == pytest.approx(stock_loss.item(), rel=1e-6)
    assert fused_nll.item() == pytest.approx(stock_nll.item(), rel=1e-6)
    assert torch.allclose(fused.grad.float(), stock.grad.float(), atol=2e-3)  # bfloat16 keeps 8 bits
    assert fused.grad[:3].abs().max() == 0


def test_a_model_with_its_own_probabilities_is_scored_by_fairseqs_path():
    model, _, _ = tiny_model_and_sample()

    class OwnProbabilities(type(model)):
        def get_normalized_probs(self, net_output, log_probs, sample=None):
            return super().get_normalized_probs(net_output, log_probs, sample)

    model.__class__ = OwnProbabilities
    assert not scores_plain_logits(model)
