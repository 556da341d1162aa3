"""The context gate read on examples (fairseq_ctx.context.context_gate): 1 − g of the gated sum of
DAT/HCE/HMCE (Yun 2022, eq. 3.8), averaged over each sentence's tokens; None without context."""
import pytest
import torch

from fairseq_ctx.context import hub
from fairseq_ctx.context.context_gate import context_gate_readings
from fairseq_ctx.context.contrastive.example import Candidate, ContrastiveExample
from fairseq_ctx.context.modules.gated_sum import GatedSum

SENTENCES = [("it is quiet .", ["the old cat sleeps ."]), ("it moves again .", ["then we sang .", "the dog waits here ."]),
             ("the dog waits here .", [])]


def examples():
    return [ContrastiveExample(source, context, Candidate("x"), [Candidate("y")]) for source, context in SENTENCES]


@pytest.fixture(scope="module")
def translator(trained_baselines):
    return hub.load(str(trained_baselines["dat"][0] / "checkpoint_last.pt"), beam=1)


def test_each_sentence_with_context_gets_its_mean_gate_share_whatever_the_batch(translator):
    readings = context_gate_readings(translator, examples())
    assert readings[2] is None and all(0 < r.gate < 1 and 0 < r.contribution < 1 for r in readings[:2])
    one_by_one = [context_gate_readings(translator, [e], batch_size=1)[0] for e in examples()]
    for alone, batched in zip(one_by_one[:2], readings[:2]):
        assert (alone.gate, alone.contribution) == pytest.approx((batched.gate, batched.contribution), abs=1e-6)
    assert one_by_one[2] is None


def test_the_share_follows_the_gate(translator):
    gate = next(m for m in translator.models[0].modules() if isinstance(m, GatedSum)).gate
    saved = gate.weight.detach().clone(), gate.bias.detach().clone()
    try:
        with torch.no_grad():
            gate.weight.mul_(0)
            gate.bias.fill_(-3.0)  # g = σ(-3) everywhere: the context's side weighs 1 − σ(-3)
        readings = context_gate_readings(translator, examples())
        assert [r.gate for r in readings[:2]] == pytest.approx([1 - torch.sigmoid(torch.tensor(-3.0)).item()] * 2,
                                                               abs=1e-6)
        with torch.no_grad():
            gate.bias.fill_(30.0)  # g = 1: nothing of the context's side reaches the output
        assert [r.contribution for r in context_gate_readings(translator, examples())[:2]] == pytest.approx([0, 0],
                                                                                                          abs=1e-6)
    finally:
        with torch.no_grad():
            gate.weight.copy_(saved[0])
            gate.bias.copy_(saved[1])


def test_a_model_without_a_gate_is_refused(trained_baselines):
    sentence_level = hub.load(str(trained_baselines["transformer"][0] / "checkpoint_last.pt"), beam=1)
    with pytest.raises(ValueError, match="has 0 gated sums"):
        context_gate_readings(sentence_level, examples())
