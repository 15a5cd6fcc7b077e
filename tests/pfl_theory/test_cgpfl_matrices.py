"""P/J/Q invariants (CGPFL eq. 3, §A.3), Lemma 1 (§A.4), zero cross-term (ICLR eq. 19),
global aggregation (Algorithm 1 step 4) — property tests with hypothesis."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pfl_theory.cgpfl_matrices import (assignment_matrix, global_aggregation, indicator_matrix,
                                       transition_matrix, zero_cross_term)

TOL = 1e-12  # float64 sums of <= 60 terms of size <= 1


@st.composite
def partitions(draw, max_n=30, max_k=6):
    """(labels, k) with every cluster non-empty."""
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(k, max_n))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.arange(k), rng.integers(0, k, size=n - k)])
    return rng.permutation(labels), k, seed


def sinkhorn(a: np.ndarray, iters: int = 500) -> np.ndarray:
    for _ in range(iters):
        a = a / a.sum(1, keepdims=True)
        a = a / a.sum(0, keepdims=True)
    return a


def birkhoff(k: int, rng: np.random.Generator, terms: int = 4) -> np.ndarray:
    w = rng.dirichlet(np.ones(terms))
    return sum(wi * np.eye(k)[rng.permutation(k)] for wi in w)


def test_hand_sized_matrices():
    labels = np.array([0, 1, 0, 0])
    p = assignment_matrix(labels, 2)
    np.testing.assert_allclose(p, [[1 / 3, 0], [0, 1], [1 / 3, 0], [1 / 3, 0]])
    np.testing.assert_allclose(indicator_matrix(labels, 2), [[1, 0, 1, 1], [0, 1, 0, 0]])
    q = transition_matrix(labels, np.array([0, 1, 1, 0]), 2)  # client 2 moves 0 -> 1
    np.testing.assert_allclose(q, [[1.0, 0.5], [0.0, 0.5]])


@settings(max_examples=40, deadline=None)
@given(part=partitions(), d=st.integers(1, 4))
def test_p_j_invariants(part, d):
    labels, k, seed = part
    n = labels.size
    p, j = assignment_matrix(labels, k), indicator_matrix(labels, k)
    assert p.shape == (n, k) and j.shape == (k, n)
    np.testing.assert_allclose(p.sum(0), np.ones(k), atol=TOL)  # column-stochastic
    assert np.all((p > 0).sum(1) == 1)  # one non-zero per row
    assert np.all(p.sum(1) <= 1 + TOL)
    np.testing.assert_allclose(j @ p, np.eye(k), atol=TOL)  # J^t P^t = I_K
    rng = np.random.default_rng(seed)
    omega = rng.normal(size=(k, d))
    np.testing.assert_array_equal(j.T @ omega, omega[labels])  # Ω J replicates ω_{k(i)}
    uploads = rng.normal(size=(n, d))
    means = np.array([[np.mean([uploads[i, c] for i in range(n) if labels[i] == kk])
                       for c in range(d)] for kk in range(k)])
    np.testing.assert_allclose(p.T @ uploads, means, atol=TOL)  # Ω_{I,R} P = cluster means
    np.testing.assert_allclose(global_aggregation(omega, uploads, p, alpha=1.0), means, atol=TOL)
    a = 0.3
    np.testing.assert_allclose(global_aggregation(omega, uploads, p, alpha=a),
                               (1 - a) * omega + a * means, atol=TOL)


@settings(max_examples=30, deadline=None)
@given(part=partitions())
def test_transition_matrix_column_stochastic_and_identity_when_stable(part):
    labels, k, seed = part
    rng = np.random.default_rng(seed)
    new = labels.copy()
    moved = rng.integers(0, labels.size)
    new[moved] = rng.integers(0, k)
    if len(set(new.tolist())) < k:
        new = labels
    q = transition_matrix(labels, new, k)
    np.testing.assert_allclose(q.sum(0), np.ones(k), atol=TOL)
    np.testing.assert_allclose(transition_matrix(labels, labels, k), np.eye(k), atol=TOL)


@settings(max_examples=40, deadline=None)
@given(part=partitions(), d=st.integers(1, 5))
def test_lemma1_nonexpansion(part, d):
    labels, k, seed = part
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(d, labels.size))
    p = assignment_matrix(labels, k)
    assert np.linalg.norm(x @ p) <= np.linalg.norm(x) * (1 + TOL)
    # any column-stochastic P with row sums <= 1 (E.A.4)
    # convex mixture of partition matrices: column sums 1, row sums <= 1, many non-zeros
    g = sum(wt * assignment_matrix(rng.permutation(labels), k) for wt in rng.dirichlet(np.ones(3)))
    np.testing.assert_allclose(g.sum(0), 1, atol=TOL)
    assert np.all(g.sum(1) <= 1 + TOL)
    assert np.linalg.norm(x @ g) <= np.linalg.norm(x) * (1 + TOL)
    y = rng.normal(size=(d, k))
    for q in (sinkhorn(rng.uniform(0.1, 1.0, size=(k, k))), birkhoff(k, rng)):
        np.testing.assert_allclose(q.sum(0), 1, atol=1e-9)
        np.testing.assert_allclose(q.sum(1), 1, atol=1e-9)
        assert np.linalg.norm(y @ q) <= np.linalg.norm(y) * (1 + 1e-9)  # Sinkhorn residual


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_zero_cross_term(k, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=k) * 10
    q = rng.dirichlet(np.ones(k), size=k)  # row-stochastic
    assert abs(zero_cross_term(v, q)) <= 1e-12 * (1 + np.abs(v).sum())
    golden = sum(v[j] * (q[j].sum() - 1) for j in range(k))  # scalar loop of eq. (19)
    assert zero_cross_term(v, 2 * q) == pytest.approx(sum(v[j] * (2 * q[j].sum() - 1) for j in range(k)))
    assert golden == pytest.approx(0.0, abs=1e-12 * (1 + np.abs(v).sum()))


def test_torch_labels_give_torch_matrices():
    labels = torch.tensor([0, 1, 1, 2])
    p = assignment_matrix(labels, 3)
    assert isinstance(p, torch.Tensor) and p.dtype == torch.float64
    j = indicator_matrix(labels, 3, dtype=torch.float32)
    assert j.dtype == torch.float32
    torch.testing.assert_close(j.double() @ p, torch.eye(3, dtype=torch.float64))


@pytest.mark.parametrize("labels, k, msg", [
    (np.array([0, 0, 2]), 3, "empty"), (np.array([0, 3]), 2, "lie in"),
    (np.array([0.0, 1.0]), 2, "integer"), (np.array([0, 1]), 3, "K must be <= N"),
])
def test_bad_labels(labels, k, msg):
    with pytest.raises(ValueError, match=msg):
        assignment_matrix(labels, k)


def test_bad_aggregation_input():
    with pytest.raises(ValueError, match="alpha"):
        global_aggregation(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 2)), alpha=1.5)
    with pytest.raises(ValueError, match="shapes"):
        global_aggregation(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((3, 2)), alpha=0.5)
