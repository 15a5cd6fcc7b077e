"""CGPFL theory (docs/formulas.md §A): lower level = k-means/N, cluster-mean minimiser, local
gradient by autograd, cost, Theorems 4.1 / 4.2 (golden values computed here), e(K) and
select_k (limits, planted K₀, monotonicity), input validation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pfl_theory.cgpfl import (alpha_hat0, beta_max, cluster_means, complexity_term, cost, e_of_k,
                              local_model_gradient, lower_level_objective, select_k,
                              theorem41_bound, theorem41_stepwise, theorem42_bound,
                              weighted_discrepancy)
from pfl_theory.kmeans import kmeans
from synthetic.contexts import planted_model_vectors

REL = 1e-12  # float64 rounding of short sums


# ------------------------------------------------------------------ lower level, cost
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 20), k=st.integers(1, 5), d=st.integers(1, 4))
def test_lower_level_equals_kmeans_objective_over_n(seed, n, k, d):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    theta, omega = rng.normal(size=(n, d)), rng.normal(size=(k, d))
    labels = rng.integers(0, k, size=n)
    golden = 0.0  # scalar loop of (1/N) Σ_j ||θ_j − ω_{k(j)}||²
    for j in range(n):
        golden += sum((theta[j, c] - omega[labels[j], c]) ** 2 for c in range(d)) / n
    assert lower_level_objective(theta, omega, labels) == pytest.approx(golden, rel=REL, abs=1e-15)


def test_cluster_means_minimise_lower_level():
    rng = np.random.default_rng(0)
    theta, labels = rng.normal(size=(12, 3)), np.r_[np.arange(3), rng.integers(0, 3, size=9)]
    means = cluster_means(theta, labels, 3)
    base = lower_level_objective(theta, means, labels)
    for _ in range(20):
        assert lower_level_objective(theta, means + 1e-3 * rng.normal(size=means.shape), labels) > base
    w = torch.tensor(means, requires_grad=True)  # autograd: gradient vanishes at the means
    obj = ((torch.tensor(theta) - w[torch.tensor(labels)]) ** 2).sum() / 12
    obj.backward()
    assert float(w.grad.abs().max()) < 1e-14


def test_local_gradient_matches_autograd_and_finite_differences():
    rng = np.random.default_rng(1)
    n, d = 6, 4
    theta = torch.tensor(rng.normal(size=(n, d)))
    copies = torch.tensor(rng.normal(size=(n, d)), requires_grad=True)  # client copies ω̃_j

    def g(c):  # G = (1/N) Σ_j ||θ_j − ω̃_j||²
        return ((theta - c) ** 2).sum() / n

    g(copies).backward()
    formula = local_model_gradient(copies.detach(), theta, n_clients=n)
    torch.testing.assert_close(copies.grad, formula, rtol=1e-12, atol=1e-14)
    h, j, c = 1e-6, 2, 1  # central difference, O(h²) exact for a quadratic up to rounding
    e = torch.zeros(n, d, dtype=torch.float64)
    e[j, c] = h
    fd = (g(copies.detach() + e) - g(copies.detach() - e)) / (2 * h)
    assert float(fd) == pytest.approx(float(formula[j, c]), rel=1e-7)  # rounding ~1e-16/1e-6


def test_cost_golden_and_weights():
    theta = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    omega = np.array([[0.0, 0.0], [5.0, 4.0]])
    assert cost(theta, omega) == pytest.approx((0 + 1 + 1) / 3, rel=REL)
    assert cost(theta, omega, client_sizes=[1, 2, 7]) == pytest.approx((0 + 2 + 7) / 10, rel=REL)


def test_cost_equals_kmeans_inertia_over_n():
    x = np.random.default_rng(2).normal(size=(25, 3))
    res = kmeans(x, 4, seed=0)
    assert cost(x, res.centers) == pytest.approx(res.inertia / 25, rel=1e-10)


# ------------------------------------------------------------------------ Theorem 4.2
def test_theorem42_golden():
    b = theorem42_bound(m=1000, n_clients=10, d=20, k=3, confidence=0.05, lam=2.0,
                        smoothness=1.0, cost_value=0.4, discrepancy=0.1)
    assert b.confidence_term == pytest.approx(2 * math.sqrt(math.log(10 / 0.05) / 1000), rel=REL)
    assert b.complexity_term == pytest.approx(math.sqrt(60 / 1000 * math.log(math.e * 1000 / 20)), rel=REL)
    assert b.personalization_term == pytest.approx(2.5 * 0.4, rel=REL)
    assert b.discrepancy_term == 0.1
    assert b.total == pytest.approx(0.145578 + 0.542884 + 1.0 + 0.1, abs=1e-5)  # hand calculator


def test_weighted_discrepancy_golden():
    assert weighted_discrepancy([1, 3], [0.1, 0.2], [0.05, 0.0], b=2.0) == \
        pytest.approx(0.25 * (0.4 + 0.05) + 0.75 * 0.8, rel=REL)


def test_theorem42_monotonicity():
    kw = dict(n_clients=20, d=10, confidence=0.1, lam=1.0, smoothness=1.0, cost_value=0.3)
    totals = [theorem42_bound(m=m, k=2, **kw).total for m in (100, 1_000, 10_000, 100_000)]
    assert all(t > 0 for t in totals) and np.all(np.diff(totals) < 0)  # decreasing in m
    # in N with per-client sample count fixed (m = 50 N): confidence term decreases
    conf = [theorem42_bound(m=50 * n, n_clients=n, d=10, k=1, confidence=0.1, lam=1.0,
                            smoothness=1.0, cost_value=0.0).confidence_term for n in (3, 10, 40, 400)]
    assert np.all(np.diff(conf) < 0)
    comp = complexity_term(np.arange(1, 11), m=1000, d=10)
    assert np.all(np.diff(comp) > 0)  # the √(dK) term increases in K


def test_best_of_restarts_cost_non_increasing_in_k():
    x = np.random.default_rng(3).normal(size=(30, 4))
    res = select_k(x, mu=1.0, m=3000, restarts=3, seed=0)
    assert np.all(np.diff(res.costs) <= 1e-12 * res.costs[0])


# ------------------------------------------------------------------------ Theorem 4.1
PARAMS41 = dict(alpha=0.8, rho_omega=3.0, rho_g=2.0, lipschitz_g=1.5, inexactness=0.1, k=4,
                n_clients=40, local_rounds=10, rounds=200, delta_gap=5.0)


def test_theorem41_golden():
    b = theorem41_bound(**PARAMS41, intra_diversity=0.5, lam=12.0)
    e1 = 8 * 0.64 * 9 / (4 * 5.0)
    e2 = math.sqrt(4 / 3) * 0.8 * 3 / 2
    e3 = 0.8 / math.sqrt(416 * 1.5**2)
    assert b.alpha_hat0_entries == pytest.approx((e1, e2, e3), rel=REL)
    a0 = min(e1, e2, e3)
    assert b.alpha_hat0 == a0 == e3
    assert b.optimization_term == pytest.approx(48 * 0.64 * (9 / 4) / (a0**2 * 200), rel=REL)
    assert b.variance_term == pytest.approx(80 * math.sqrt(26 * 9 / 4 * 2.25 * 0.01) / math.sqrt(40 * 4 * 10 * 200), rel=REL)
    assert b.inexactness_floor == pytest.approx(52 * 0.01 / 160, rel=REL)
    assert b.personalized == pytest.approx(b.generalized + 0.25 / 144 + 0.01, rel=REL)


def test_theorem41_decreasing_in_n_r_t():
    for key, values in (("n_clients", (10, 40, 160)), ("local_rounds", (1, 5, 20)), ("rounds", (10, 100, 1000))):
        gens = [theorem41_bound(**{**PARAMS41, key: v}).generalized for v in values]
        assert all(g > 0 for g in gens) and np.all(np.diff(gens) < 0), key


def test_alpha_hat0_nonpositive_gap_does_not_bind():
    e = alpha_hat0(alpha=1.0, rho_omega=1.0, rho_g=1.0, lipschitz_g=1.0, k=2, delta_gap=0.0)
    assert e[0] == math.inf


def test_alpha_hat0_entries_enforce_domination():
    rng = np.random.default_rng(4)
    for _ in range(50):
        p = dict(alpha=rng.uniform(0.1, 1), rho_omega=rng.uniform(0.1, 5), rho_g=rng.uniform(0.1, 5),
                 lipschitz_g=rng.uniform(0.1, 5), k=int(rng.integers(1, 5)), delta_gap=rng.uniform(0.01, 5))
        k, a = p["k"], p["alpha"]
        c1, c2 = 32 * p["rho_omega"] ** 2 / k, 24 * p["rho_g"] ** 2 / k
        ah = min(alpha_hat0(**p)) * rng.uniform(0.01, 1)  # any α̂ ≤ α̂₀
        t = 100
        assert 4 * p["delta_gap"] / (ah * t) <= c1 * a**2 / (ah**2 * t) * (1 + REL)
        assert c2 / t <= c1 * a**2 / (ah**2 * t) * (1 + REL)


def test_stepwise_case_analysis_constants_three_and_four():
    rng = np.random.default_rng(5)
    for _ in range(50):
        p = dict(alpha=rng.uniform(0.1, 1), rho_omega=rng.uniform(0.1, 5), rho_g=rng.uniform(0.1, 5),
                 lipschitz_g=rng.uniform(0.1, 5), inexactness=rng.uniform(0.001, 1), k=int(rng.integers(1, 5)),
                 n_clients=10, local_rounds=int(rng.integers(1, 10)), rounds=int(rng.integers(1, 10_000)),
                 delta_gap=rng.uniform(0.01, 5))
        k, n, r, t, a = p["k"], 10, p["local_rounds"], p["rounds"], p["alpha"]
        c1 = 32 * p["rho_omega"] ** 2 / k
        c3 = 832 * p["inexactness"] ** 2 * p["lipschitz_g"] ** 2 / (k * n * r)
        a0 = theorem41_bound(**p).alpha_hat0
        ah = min(a0, a * (c1 / (c3 * t)) ** 0.25)
        lhs = theorem41_stepwise(alpha_hat=ah, **p)
        rhs = 3 * c1 * a**2 / (a0**2 * t) + 4 * math.sqrt(c1 * c3 / t) + 52 * p["inexactness"] ** 2 / (k * n)
        assert lhs <= rhs * (1 + 1e-10)


def test_beta_max_golden():
    assert beta_max(local_rounds=10, lipschitz_g=2.0) == pytest.approx(1 / (2 * math.sqrt(110) * 2), rel=REL)


# ------------------------------------------------------------------- e(K), select_k
def test_e_of_k_golden_vectorised():
    ks, costs = np.array([1, 2, 4]), np.array([3.0, 1.0, 0.5])
    lg = math.log(math.e * 500 / 10)
    golden = [math.sqrt(10 * kk / 500 * lg) + 0.2 * c for kk, c in zip(ks, costs)]
    np.testing.assert_allclose(e_of_k(ks, costs, mu=0.2, m=500, d=10), golden, rtol=REL)


def test_select_k_limits():
    x, _ = planted_model_vectors(16, 3, 4, separation=5.0, noise=0.5, seed=0)
    assert select_k(x, mu=0.0, m=1600, restarts=3).k_hat == 1
    assert select_k(x, mu=1e6, m=1600, restarts=3).k_hat == 8  # k_max = N // 2
    assert select_k(x, mu=1e6, m=1600, k_max=5, restarts=3).k_hat == 5
    assert select_k(x[:1], mu=1.0, m=100).ks.tolist() == [1]  # N = 1: k_max = max(1, 0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k0", [2, 3, 4])
def test_select_k_recovers_planted_k0_over_mu_range(seed, k0):
    x, _ = planted_model_vectors(20, k0, 5, separation=10.0, noise=0.3, seed=seed)
    res = select_k(x, mu=0.0, m=2000, restarts=4, seed=seed)
    for mu in (0.01, 0.03, 0.1, 0.3):  # range where drop(K₀) ≫ Δcomplexity/μ ≫ drop(K₀+1)
        e = res.complexity_terms + mu * res.costs
        assert int(res.ks[np.argmin(e)]) == k0


def test_select_k_values_recomputed_independently():
    x, _ = planted_model_vectors(12, 2, 3, separation=4.0, noise=0.5, seed=1)
    sizes = np.arange(1, 13) * 10.0
    res = select_k(x, mu=0.5, m=sizes, restarts=3)
    for k, cl, c in zip(res.ks, res.clusterings, res.costs):
        assert cl.centers.shape == (k, 3)
        assert c == pytest.approx(cost(x, cl.centers, client_sizes=sizes), rel=1e-10)
    lg = math.log(math.e * sizes.sum() / 3)
    np.testing.assert_allclose(res.e_values, [math.sqrt(3 * k / sizes.sum() * lg) + 0.5 * c
                                              for k, c in zip(res.ks, res.costs)], rtol=1e-12)


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs, msg", [
    (dict(m=2, d=10), "log"), (dict(m=-5, d=10), "m must"), (dict(m=100, d=0), "d must"),
])
def test_complexity_validation(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        complexity_term(1, **kwargs)


def test_bound_validation():
    kw = dict(m=1000, n_clients=10, d=20, k=3, confidence=0.05, lam=1.0, smoothness=1.0, cost_value=0.1)
    for bad, msg in ((dict(k=11), "K must be <= N"), (dict(confidence=1.0), r"\(0, 1\)"),
                     (dict(confidence=0.0), r"\(0, 1\)"), (dict(lam=-1.0), "lam"),
                     (dict(n_clients=-3), "n_clients"), (dict(m=5), "log")):
        with pytest.raises(ValueError, match=msg):
            theorem42_bound(**{**kw, **bad})
    with pytest.raises(ValueError, match="K must be <= N"):
        theorem41_bound(**{**PARAMS41, "k": 41})
    with pytest.raises(ValueError, match="both"):
        theorem41_bound(**PARAMS41, lam=1.0)


def test_select_k_validation():
    x = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(ValueError, match="mu"):
        select_k(x, mu=-1.0, m=600)
    with pytest.raises(ValueError, match="k_max"):
        select_k(x, mu=1.0, m=600, k_max=7)
    with pytest.raises(ValueError, match="client_sizes"):
        select_k(x, mu=1.0, m=np.array([1, 2, -3, 4, 5, 6.0]))
    with pytest.raises(ValueError, match="log"):
        select_k(x, mu=1.0, m=0.5)
    with pytest.raises(ValueError, match="K must be <= N"):
        cost(x[:2], x)
    with pytest.raises(ValueError, match="client_sizes"):
        cost(x, x[:2], client_sizes=[1, 2])
