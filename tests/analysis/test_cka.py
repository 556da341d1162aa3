"""CKA/HSIC numerics (Yun, 2022, ch. 4): NumPy reference, invariances, dtypes, gradients, SRIP."""
import numpy as np
import pytest
import torch

from fairseq_ctx.analysis.cka import (
    cka, hsic, mean_pairwise_linear_hsic, pairwise_linear_cka, sample_paired_rows, sample_rows, srip,
)
from fairseq_ctx.analysis.svcca import svcca


def numpy_linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    n = x.shape[0]
    c = np.eye(n) - np.ones((n, n)) / n
    k, l = x @ x.T, y @ y.T
    h = lambda a, b: np.trace(a @ c @ b @ c) / (n - 1) ** 2  # noqa: E731
    return h(k, l) / np.sqrt(h(k, k) * h(l, l))


@pytest.mark.parametrize("d2", [8, 200])  # feature space (d < n) and Gram space (d >= n)
def test_linear_cka_matches_numpy_float64_reference(d2):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 16))
    y = x @ rng.normal(size=(16, d2)) + 0.5 * rng.normal(size=(64, d2))
    expected = numpy_linear_cka(x, y)
    got = cka(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
    assert got.dtype == torch.float32 and got.dim() == 0
    assert abs(got.item() - expected) < 1e-5


def test_feature_and_gram_space_agree():
    x, y = torch.randn(40, 10, dtype=torch.float64), torch.randn(40, 30, dtype=torch.float64)
    feature = hsic(x, y)  # both dims < n → feature space
    gram = hsic(torch.cat([x, torch.zeros(40, 40, dtype=x.dtype)], 1), y)  # d >= n → Gram space, same value
    assert torch.allclose(feature, gram, rtol=1e-10)


@pytest.mark.parametrize("kernel,unbiased", [("linear", False), ("linear", True), ("rbf", False)])
def test_self_similarity_is_one(kernel, unbiased):
    x = torch.randn(50, 12)
    assert abs(cka(x, x, kernel=kernel, unbiased=unbiased).item() - 1.0) < 1e-5


def test_invariance_to_orthogonal_transform_and_isotropic_scaling():
    torch.manual_seed(0)
    x, y = torch.randn(60, 10, dtype=torch.float64), torch.randn(60, 20, dtype=torch.float64)
    y = y + x @ torch.randn(10, 20, dtype=torch.float64)
    u, _ = torch.linalg.qr(torch.randn(10, 10, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(20, 20, dtype=torch.float64))
    base = cka(x, y)
    assert 0.0 <= base.item() <= 1.0
    assert torch.allclose(cka(x @ u, y @ v), base, atol=1e-12)
    assert torch.allclose(cka(3.5 * x, 0.01 * y), base, atol=1e-12)
    assert torch.allclose(cka(x @ u, y @ v, kernel="rbf"), cka(x, y, kernel="rbf"), atol=1e-10)


def test_half_precision_inputs_give_the_float32_answer():
    x, y = torch.randn(64, 16), torch.randn(64, 24)
    x16, y16 = x.half(), y.half()
    reference = cka(x16.float(), y16.float())
    got = cka(x16, y16)
    assert got.dtype == torch.float32
    assert torch.allclose(got, reference, atol=1e-6)
    assert torch.isfinite(cka(x.bfloat16() * 1e3, y.bfloat16() * 1e3))


@pytest.mark.parametrize("fn", [cka, hsic])
@pytest.mark.parametrize("kernel,unbiased,d", [("linear", False, 3), ("linear", False, 9),
                                                ("linear", True, 3), ("rbf", False, 3)])
def test_gradcheck_float64(fn, kernel, unbiased, d):
    x = torch.randn(8, d, dtype=torch.float64, requires_grad=True)
    y = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    # the median-rule bandwidth is a constant for gradients, so gradcheck the RBF kernel at a fixed σ
    sigma = 1.5 if kernel == "rbf" else None
    assert torch.autograd.gradcheck(lambda a, b: fn(a, b, kernel=kernel, unbiased=unbiased, rbf_sigma=sigma), (x, y))


def test_unbiased_hsic_of_independent_samples_averages_near_zero():
    generator = torch.Generator().manual_seed(0)
    unbiased = [hsic(torch.randn(16, 4, generator=generator, dtype=torch.float64),
                     torch.randn(16, 4, generator=generator, dtype=torch.float64), unbiased=True) for _ in range(400)]
    biased = [hsic(torch.randn(16, 4, generator=generator, dtype=torch.float64),
                   torch.randn(16, 4, generator=generator, dtype=torch.float64)) for _ in range(400)]
    mean_u, mean_b = torch.stack(unbiased).mean().item(), torch.stack(biased).mean().item()
    sem_u = torch.stack(unbiased).std().item() / 20
    assert abs(mean_u) < 3 * sem_u
    assert mean_b > 10 * sem_u  # the biased estimator is positively biased at small n


def test_srip_is_zero_for_orthonormal_columns_and_positive_otherwise():
    q, _ = torch.linalg.qr(torch.randn(30, 10, dtype=torch.float64))
    assert srip(q, iterations=20).item() < 1e-10
    m = q.clone()
    m[:, 1] = m[:, 0]  # two identical columns: eigenvalue 2 of MᵀM → σ_max(MᵀM − I) = 1
    assert abs(srip(m, iterations=50).item() - 1.0) < 1e-6


def test_pairwise_head_cka_matches_pairwise_calls():
    heads = torch.randn(100, 4, 8)
    matrix = pairwise_linear_cka(heads)
    assert torch.allclose(matrix[1, 3], cka(heads[:, 1], heads[:, 3]), atol=1e-6)
    assert torch.allclose(matrix.diagonal(), torch.ones(4), atol=1e-6)


def test_mean_pairwise_hsic_is_the_mean_over_head_pairs():
    heads = torch.randn(50, 4, 8, dtype=torch.float64)
    pairs = [hsic(heads[:, i], heads[:, j]) for i in range(4) for j in range(i + 1, 4)]
    assert torch.allclose(mean_pairwise_linear_hsic(heads), torch.stack(pairs).mean(), rtol=1e-10)


def test_svcca_identical_and_linear_maps():
    x = np.random.default_rng(0).normal(size=(200, 6))
    assert abs(svcca(x, x @ np.random.default_rng(1).normal(size=(6, 6)))[0] - 1.0) < 1e-8
    assert svcca(x, np.random.default_rng(2).normal(size=(200, 6)))[0] < 0.3


def test_sampling_never_uses_padding_and_warns_once_when_n_is_too_large(caplog):
    states = torch.arange(2 * 5, dtype=torch.float32).view(2, 5, 1).repeat(1, 1, 3)
    mask = torch.tensor([[False, False, True, True, True], [False, False, False, True, True]])
    rows = sample_rows(states, mask, 3, generator=torch.Generator().manual_seed(0), what="test-a")
    allowed = {0.0, 1.0, 5.0, 6.0, 7.0}
    assert rows.shape == (3, 3) and set(rows[:, 0].tolist()) <= allowed
    with caplog.at_level("WARNING"):
        all_rows = sample_rows(states, mask, 50, what="test-b")
        sample_rows(states, mask, 50, what="test-b")
    assert sorted(all_rows[:, 0].tolist()) == sorted(allowed)
    assert sum("only 5 non-padding" in r.message for r in caplog.records) == 1
    other = torch.arange(2 * 3, dtype=torch.float32).view(2, 3, 1) + 100
    other_mask = torch.tensor([[True, True, True], [False, True, False]])
    a, b = sample_paired_rows(states, mask, other, other_mask, 10, what="test-c")
    assert a.shape[0] == 3 and set(a[:, 0].tolist()) == {5.0, 6.0, 7.0}  # example 0 has no valid b
    assert set(b[:, 0].tolist()) <= {103.0, 105.0}
