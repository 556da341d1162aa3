"""Sequence shortening (Mąka et al., 2024): poolings by hand, grouping and selecting as weighted
sums of the tokens (softmax or sparsemax weights), sparsemax itself, and no dependence on padding."""
import pytest
import torch

from fairseq_ctx.context.modules.sequence_shortening import METHODS, SequenceShortening
from fairseq_ctx.context.modules.sparsemax import sparsemax

DIM = 8


def shortening(method: str, size: int, sparse: bool = False) -> SequenceShortening:
    torch.manual_seed(1)
    return SequenceShortening(method, size, DIM, heads=2, attention_dropout=0.0, sparsemax=sparse).eval()


def test_sparsemax_is_the_projection_onto_the_simplex():
    # Martins and Astudillo (2016): z = (1, 0.5, -1) has support {1, 2} and tau = (1.5 - 1) / 2
    torch.testing.assert_close(sparsemax(torch.tensor([1.0, 0.5, -1.0])), torch.tensor([0.75, 0.25, 0.0]))
    torch.testing.assert_close(sparsemax(torch.tensor([3.0, 0.0, 0.0])), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(sparsemax(torch.zeros(4)), torch.full((4,), 0.25))
    scores = torch.randn(5, 7, 3)
    for dim in (0, 1, 2):
        probabilities = sparsemax(scores, dim=dim)
        assert probabilities.min() >= 0
        torch.testing.assert_close(probabilities.sum(dim), torch.ones_like(probabilities.sum(dim)))
    shifted = sparsemax(scores + 10.0, dim=1)  # invariant to adding a constant, like softmax
    torch.testing.assert_close(shifted, sparsemax(scores, dim=1))


def test_sparsemax_gradient_is_the_papers_jacobian():
    scores = torch.tensor([0.9, 0.7, 0.5, -2.0], dtype=torch.double, requires_grad=True)
    jacobian = torch.autograd.functional.jacobian(sparsemax, scores)
    support = sparsemax(scores).gt(0).double()
    assert support.tolist() == [1.0, 1.0, 1.0, 0.0]
    torch.testing.assert_close(jacobian, torch.diag(support) - torch.outer(support, support) / support.sum())
    assert torch.autograd.gradcheck(lambda z: sparsemax(z, dim=1), (torch.randn(3, 6, dtype=torch.double,
                                                                                requires_grad=True),))


def test_poolings_average_and_max_windows_of_real_tokens():
    states = torch.arange(5 * DIM, dtype=torch.float).view(1, 5, DIM)
    padding = torch.tensor([[False, False, False, True, True]])
    for method, expected in (("mean_pooling", [states[0, :2].mean(0), states[0, 2]]),
                             ("max_pooling", [states[0, :2].amax(0), states[0, 2]])):
        pooled, window_padding = shortening(method, 2).pool(states * (~padding).unsqueeze(-1), padding)
        assert window_padding.tolist() == [[False, False, True]]
        torch.testing.assert_close(pooled[0, :2], torch.stack(expected))
        assert torch.equal(pooled[0, 2], torch.zeros(DIM))


def test_linear_pooling_projects_each_window_of_tokens_concatenated():
    module = shortening("linear_pooling", 2)
    states = torch.randn(1, 5, DIM)
    padding = torch.tensor([[False, False, False, True, True]])
    pooled, window_padding = module.pool(states * (~padding).unsqueeze(-1), padding)
    assert window_padding.tolist() == [[False, False, True]]
    weight, bias = module.window_projection.weight, module.window_projection.bias
    first = weight @ torch.cat([states[0, 0], states[0, 1]]) + bias
    second = weight @ torch.cat([states[0, 2], torch.zeros(DIM)]) + bias  # the padding token counts as zeros
    torch.testing.assert_close(pooled[0, :2], torch.stack([first, second]), atol=1e-5, rtol=0)
    assert torch.equal(pooled[0, 2], torch.zeros(DIM))


@pytest.mark.parametrize("sparse", [False, True], ids=["softmax", "sparsemax"])
@pytest.mark.parametrize("method", ["grouping", "selecting"])
def test_grouping_and_selecting_are_weighted_sums_of_the_tokens(method, sparse):
    module = shortening(method, 3, sparse)
    states, padding = torch.randn(2, 4, DIM), torch.tensor([[False] * 4, [False, False, True, True]])
    captured = {}
    module.attention.register_forward_hook(lambda m, args, kwargs, out: captured.update(query=kwargs["query"]),
                                           with_kwargs=True)
    module(states, padding)
    pooled = captured["query"].transpose(0, 1) - module.position_table(3).unsqueeze(0)
    scores = module.scores(states)
    for row in range(2):
        real = states[row][~padding[row]]
        weights = (sparsemax if sparse else torch.softmax)(scores[row][~padding[row]], dim=-1 if method == "grouping" else 0)
        torch.testing.assert_close(pooled[row], weights.t() @ real, atol=1e-5, rtol=0)
        if method == "selecting":
            torch.testing.assert_close(weights.sum(0), torch.ones(3))


@pytest.mark.parametrize("method, sparse", [(method, False) for method in METHODS]
                         + [("grouping", True), ("selecting", True)])
def test_output_does_not_depend_on_padding(method, sparse):
    module = shortening(method, 2, sparse)
    states = torch.randn(2, 5, DIM)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, out_padding = module(states, padding)
    longer = torch.cat([states, torch.randn(2, 3, DIM)], dim=1)
    out2, out2_padding = module(longer, torch.cat([padding, torch.ones(2, 3, dtype=torch.bool)], dim=1))
    keep = ~out_padding
    torch.testing.assert_close(out2[:, :out.size(1)][keep], out[keep], atol=1e-5, rtol=0)
    assert torch.equal(out2_padding[:, :out.size(1)], out_padding) and out2_padding[:, out.size(1):].all()


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="--shortening must be one of"):
        SequenceShortening("average", 2, DIM, 2, 0.0)
    with pytest.raises(ValueError, match="--shortening-size must be >= 1"):
        SequenceShortening("grouping", 0, DIM, 2, 0.0)
    with pytest.raises(ValueError, match="--shortening-sparsemax normalises grouping or selecting"):
        SequenceShortening("mean_pooling", 2, DIM, 2, 0.0, sparsemax=True)
