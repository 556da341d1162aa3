"""distance_constraint: hand-computed values (eq. 4.18–4.21, eq. 3.6–3.8) and negative sampling."""
import math

import pytest
import torch
from torch import nn

from tests.embedding_helpers import build_embedding_model, one_torch_thread, valid_batch  # noqa: F401
from fairseq_ctx.embedding.distance_constraint import (
    DistanceConstraintCriterion,
    cnv_distance_terms,
    mde_distance_terms,
    sample_negatives,
)
from fairseq_ctx.embedding.data.multilingual_embedding_dataset import sample_pair_rows

P_A = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
P_B = torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
NEGATIVES = torch.tensor([[1, 2], [0, 2], [0, 1]])
# By hand: ‖P_a − P_b‖ = 1, 1, 2 → v_norm = 4/3; d_p = (1, 1, 4) · 3/4 = (0.75, 0.75, 3).
# Squared distances to the negatives: row 0 → (2, 0), row 1 → (2, 1), row 2 → (1, 2); · 3/4.
# δ = max(0, 0.5 − (d_n − d_p)): row 0 (0, 1.25), row 1 (0, 0.5), row 2 (2.75, 2.0).
HAND_D_P = [0.75, 0.75, 3.0]
HAND_MEAN_DELTA = [0.625, 0.25, 2.375]
# all-pairs: ‖P_a[i] − P_b[j]‖² rows (1, 2, 0), (2, 1, 1), (1, 2, 4) → v_norm = 14/9; d = squared · 9/14:
# d_p = (9, 9, 36)/14; δ row 0 (0, 0.5 + 9/14), row 1 (0, 0.5), row 2 (0.5 + 27/14, 0.5 + 18/14).
HAND_ALL_PAIRS = {"v_norm": 14 / 9, "d_p": [9 / 14, 9 / 14, 36 / 14],
                  "mean_delta": [(0.5 + 9 / 14) / 2, 0.25, (1.0 + 45 / 14) / 2]}


def test_mde_terms_match_hand_computation():
    terms = mde_distance_terms(P_A, P_B, NEGATIVES, margin=0.5, eps=0.0, normalizer="parallel")
    assert terms["v_norm"].item() == pytest.approx(4 / 3)
    assert terms["d_p"].tolist() == pytest.approx(HAND_D_P)
    assert terms["delta"].mean(1).tolist() == pytest.approx(HAND_MEAN_DELTA)
    terms = mde_distance_terms(P_A, P_B, NEGATIVES, margin=0.5, eps=0.0, normalizer="all-pairs")
    assert terms["v_norm"].item() == pytest.approx(HAND_ALL_PAIRS["v_norm"])
    assert terms["d_p"].tolist() == pytest.approx(HAND_ALL_PAIRS["d_p"])
    assert terms["delta"].mean(1).tolist() == pytest.approx(HAND_ALL_PAIRS["mean_delta"])


def test_all_pairs_normalizer_makes_the_terms_scale_invariant():
    """With the parallel-pair mean distance, shrinking every embedding shrinks d_p (the collapse of
    the 8-pair demo); with the all-pairs mean squared distance the terms do not change."""
    torch.manual_seed(0)
    p_a, p_b = torch.randn(6, 4), torch.randn(6, 4)
    negatives = sample_negatives(6, 5, "cpu")
    for normalizer, shrinks in (("parallel", True), ("all-pairs", False)):
        full = mde_distance_terms(p_a, p_b, negatives, 0.5, 0.0, normalizer)
        small = mde_distance_terms(0.01 * p_a, 0.01 * p_b, negatives, 0.5, 0.0, normalizer)
        assert torch.allclose(small["d_p"], 0.01 * full["d_p"] if shrinks else full["d_p"], rtol=1e-4)


def test_cnv_terms_match_hand_computation():
    terms = cnv_distance_terms(P_A, P_B, NEGATIVES, margin=0.5)
    # k = ‖P_a − P_b‖² − ‖P_a − P_bj‖²: row 0 (−1, 1), row 1 (−1, 0), row 2 (3, 2); 2·v_norm + 1 = 11/3.
    expected = [[0.5 - 0.5 * 3 / 11, 0.5 + 0.5 * 3 / 11], [0.5 - 0.5 * 3 / 11, 0.5], [0.5 + 1.5 * 3 / 11, 0.5 + 3 / 11]]
    assert terms["delta"].tolist() == [pytest.approx(row) for row in expected]


class FixedEmbeddingModel(nn.Module):
    """Uniform logits over 4 types (l_mt = ln 4 per token); P_a for sources, P_b from embed()."""

    def forward(self, src_tokens, src_lengths, prev_output_tokens):
        logits = torch.zeros(*prev_output_tokens.shape, 4, requires_grad=True)
        return logits, {"sentence_embedding": P_A.clone().requires_grad_()}

    def embed(self, src_tokens, src_lengths):
        return P_B.clone()

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return torch.log_softmax(net_output[0], dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


@pytest.mark.parametrize("reduction,sentences_per_distance_unit", [("sentence", 6), ("token", 3)])
def test_criterion_loss_on_three_sentences_matches_hand_value(reduction, sentences_per_distance_unit):
    criterion = DistanceConstraintCriterion(task=None, sentence_avg=False, label_smoothing=0.0,
                                            distance_beta=0.25, distance_lambda=1.0, distance_margin=0.5,
                                            distance_negatives=40, distance_epsilon=0.0,
                                            distance_normalizer="parallel", distance_reduction=reduction)
    criterion.padding_idx = 1
    tokens = torch.tensor([[2, 3], [3, 2], [2, 2]])
    sample = {"net_input": {"src_tokens": tokens, "src_lengths": torch.tensor([2, 2, 2]),
                            "prev_output_tokens": tokens}, "target": tokens, "ntokens": 6,
              "target_input": {"src_tokens": tokens, "src_lengths": torch.tensor([2, 2, 2])}}
    loss, sample_size, log = criterion(FixedEmbeddingModel(), sample)
    # negatives capped at B − 1 = 2, i.e. exactly the other two sentences (order does not matter)
    per_sentence = [d + delta for d, delta in zip(HAND_D_P, HAND_MEAN_DELTA)]  # 1.375, 1.0, 5.375
    # sentence: eq. 4.21 summed over the 3 sentences, / 6 target tokens; token: distance terms × 6/3
    expected = 0.5 * math.log(4) + 0.25 * sum(per_sentence) / sentences_per_distance_unit
    assert sample_size == 6
    assert loss.item() / sample_size == pytest.approx(expected, abs=1e-5)
    assert log["d_p"].item() == pytest.approx(sum(HAND_D_P))
    assert log["delta"].item() == pytest.approx(sum(HAND_MEAN_DELTA))
    assert log["v_norm"].item() / 3 == pytest.approx(4 / 3)


def test_negatives_exclude_the_positive_and_are_distinct():
    torch.manual_seed(0)
    negatives = sample_negatives(50, 40, "cpu")
    assert negatives.shape == (50, 40)
    assert not (negatives == torch.arange(50).unsqueeze(1)).any()
    assert all(len(set(row.tolist())) == 40 for row in negatives)
    assert sample_negatives(3, 2, "cpu").sort(1).values.tolist() == [[1, 2], [0, 2], [0, 1]]


def test_distance_constraint_pulls_translations_together(multilingual_data):
    """A few updates with the constraint bring a sentence closer to its translation than to others."""
    task, model, criterion = build_embedding_model(multilingual_data, "tmde", ["--distance-beta", "1.0"])
    task.load_dataset("valid")
    dataset = task.datasets["valid"]
    batches = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=400)
    samples = [dataset.collater([dataset[i] for i in b]) for b in batches if len(b) > 8]
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def gap() -> float:
        with torch.no_grad():
            terms = [criterion(model, s)[2] for s in samples]
        return sum(float(t["delta"]) for t in terms) / sum(t["nsentences"] for t in terms)

    before = gap()
    for _ in range(3):
        for sample in samples:
            optimizer.zero_grad()
            criterion(model, sample)[0].backward()
            optimizer.step()
    assert gap() < 0.8 * before


def test_pair_sampling_strategies():
    uniform = sample_pair_rows([100, 10], "uniform", 5.0, seed=1)
    assert len(uniform) == 110 and (uniform[:, 0] == 0).sum() == 55 and (uniform[:, 0] == 1).sum() == 55
    assert set(uniform[uniform[:, 0] == 1, 1]) == set(range(10)), "a small pair is repeated whole first"
    temperature = sample_pair_rows([100, 10], "temperature", 2.0, seed=1)
    assert (temperature[:, 0] == 1).sum() == round(110 * 10 ** 0.5 / (100 ** 0.5 + 10 ** 0.5))
    natural = sample_pair_rows([100, 10], "natural", 5.0, seed=1)
    assert sorted(map(tuple, natural)) == [(0, i) for i in range(100)] + [(1, i) for i in range(10)]


@pytest.mark.parametrize("normalizer", ["parallel", "all-pairs"])
def test_distance_terms_equal_the_direct_difference_form_with_gradients(normalizer):
    """The (B, B) matmul form of the negatives' distances equals ‖P_a − P_b[neg]‖² computed from the
    (B, N, d) differences, values and gradients, at a realistic embedding scale."""
    torch.manual_seed(0)
    p_a, p_b = (3 * torch.randn(64, 32)).requires_grad_(), (3 * torch.randn(64, 32)).requires_grad_()
    negatives = sample_negatives(64, 40, "cpu")
    terms = mde_distance_terms(p_a, p_b, negatives, 0.5, 1e-6, normalizer)
    if normalizer == "all-pairs":
        v_norm = torch.cdist(p_a, p_b).pow(2).mean()
    else:
        v_norm = (p_a - p_b).norm(dim=-1).mean()
    d_p = (p_a - p_b).pow(2).sum(-1) / (v_norm + 1e-6)
    d_n = (p_a.unsqueeze(1) - p_b[negatives]).pow(2).sum(-1) / (v_norm + 1e-6)
    delta = torch.relu(0.5 - (d_n - d_p.unsqueeze(1)))
    fast = torch.autograd.grad((terms["d_p"].sum() + terms["delta"].mean(1).sum()), (p_a, p_b))
    direct = torch.autograd.grad((d_p.sum() + delta.mean(1).sum()), (p_a, p_b))
    assert torch.allclose(terms["v_norm"], v_norm, rtol=1e-5)
    assert torch.allclose(terms["delta"], delta, atol=1e-5)
    assert all(torch.allclose(f, d, atol=1e-5) for f, d in zip(fast, direct))


class _BackwardOnly:
    """The part of fairseq's optimizer interface that task.train_step uses."""

    def backward(self, loss):
        loss.backward()


def test_distance_start_update_trains_plain_tmde_first(multilingual_data):
    task, model, criterion = build_embedding_model(multilingual_data, "tmde", ["--distance-start-update", "5"])
    sample = valid_batch(task)
    criterion.train()
    _, _, before = task.train_step(sample, model, criterion, _BackwardOnly(), update_num=4)
    assert criterion.num_updates == 4 and "d_p" not in before, "plain label-smoothed CE before the start"
    plain_loss, _, _ = super(DistanceConstraintCriterion, criterion).forward(model, sample)
    assert float(before["loss"]) == pytest.approx(float(plain_loss), rel=1e-6)
    _, _, after = task.train_step(sample, model, criterion, _BackwardOnly(), update_num=5)
    assert "d_p" in after and float(after["loss"]) < float(plain_loss), "eq. 4.21 (0.5 l_mt + ...) from the start"
    criterion.set_num_updates(0)
    criterion.eval()
    assert "d_p" in criterion(model, sample)[2], "validation always reports the constraint"


def test_detached_target_keeps_the_loss_and_moves_only_the_source_side(multilingual_data):
    task, model, criterion = build_embedding_model(multilingual_data, "tmde", ["--distance-beta", "1.0"])
    sample = valid_batch(task)
    grads = {}
    for detach in (False, True):
        criterion.detach_target = detach
        model.zero_grad()
        torch.manual_seed(0)
        loss, _, _ = criterion(model, sample)
        loss.backward()
        grads[detach] = (loss.item(), [p.grad.clone() for p in model.parameters()])
        assert all(p.grad is not None for p in model.parameters())
    assert grads[True][0] == pytest.approx(grads[False][0], rel=1e-6)
    assert any((a - b).abs().max() > 1e-6 for a, b in zip(grads[True][1], grads[False][1]))
