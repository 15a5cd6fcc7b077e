"""Tests of verification/estimators/complexity.py, each against an independent reference: exact sign
enumeration, closed forms, brute-force minimum covers, Monte-Carlo population risks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from synthetic.linear import make_linear_federation
from verification.estimators import complexity as C


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_rademacher_linear_monte_carlo_matches_exact_enumeration(p):
    x = np.random.default_rng(0).normal(size=(10, 3))
    exact = C.rademacher_linear_exact(x, radius=1.7, p=p)
    est, se = C.rademacher_linear(x, radius=1.7, p=p, n_draws=4000, seed=1)
    assert abs(est - exact) <= 4 * se  # 4 standard errors: MC noise, false alarm < 1e-4


def test_rademacher_linear_exact_closed_form_orthogonal_pair():
    # x_1 ⊥ x_2 with norms a, b: E_ε ‖ε_1 x_1 + ε_2 x_2‖_2 = √(a² + b²) for every ε
    x = np.array([[3.0, 0.0], [0.0, 4.0]])
    assert C.rademacher_linear_exact(x, radius=2.0) == pytest.approx(2.0 * 5.0 / 2)


def test_mlp_lower_at_depth_one_reaches_the_dual_norm():
    x = np.random.default_rng(2).normal(size=(12, 3))
    exact = C.rademacher_linear_exact(x, radius=1.3)
    est, se = C.rademacher_mlp_lower(x, widths=[3, 1], spectral_bounds=[1.3], n_draws=600,
                                     steps=150, seed=3)
    assert est <= exact + 4 * se  # a lower estimate (MC noise 4 SE)
    assert est >= exact - 4 * se  # ...and at depth 1 the ascent reaches the supremum


def test_mlp_lower_single_sample_is_exact():
    # m = 1: sup_{‖w‖≤M} ε ⟨w, x⟩ = M ‖x‖ for either sign
    x = np.array([[0.6, -0.8, 0.0]])
    est, se = C.rademacher_mlp_lower(x, widths=[3, 1], spectral_bounds=[2.0], n_draws=4,
                                     steps=100, seed=0)
    assert est == pytest.approx(2.0, rel=1e-6) and se == pytest.approx(0.0, abs=1e-9)


def test_mlp_lower_depth_two_between_construction_and_frobenius_bound():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)  # ‖x‖ = B = 1
    m1, m2, width = 1.5, 2.0, 4
    est, se = C.rademacher_mlp_lower(x, widths=[3, width, 1], spectral_bounds=[m1, m2],
                                     n_draws=200, steps=150, seed=5)
    # construction W1 = [u; −u; 0; 0], W2 = [1, −1, 0, 0] gives M1 M2/2 · ⟨û, x⟩
    lin, lin_se = C.rademacher_linear(x, radius=m1 * m2 / 2, n_draws=4000, seed=6)
    assert est >= lin - 4 * (se + lin_se)
    # Golowich et al. (2018, Thm 1) with ‖W‖_F ≤ √rank ‖W‖₂: an upper bound on the truth
    upper = (math.sqrt(2 * math.log(2) * 2) + 1) * m1 * math.sqrt(3) * m2 / math.sqrt(40)
    assert est <= upper


def _exact_min_cover(v: np.ndarray, eps: float) -> int:
    dist = np.abs(v[:, None] - v[None]).max(-1)
    for k in range(1, len(v) + 1):
        for subset in itertools.combinations(range(len(v)), k):
            if np.all(dist[:, subset].min(1) <= eps):
                return k
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", range(5))
def test_greedy_estimates_bracket_the_brute_force_minimum_cover(seed):
    v = np.random.default_rng(seed).uniform(-1, 1, size=(9, 3))
    for eps in (0.2, 0.5, 0.9):
        exact = _exact_min_cover(v, eps)
        est = C.covering_estimates(v, eps)
        assert est["lower"] <= exact <= est["sample_cover"]


def test_covering_lower_estimate_of_a_one_dimensional_class():
    # {x ↦ w x : |w| ≤ M} on a sample with max |x| = B is the interval [−MB, MB] in sup
    # norm: N(ε) = ⌈MB/ε⌉ exactly; the lower estimate must not exceed it and be close
    M, B = 2.0, 1.5
    xs = np.array([0.3, -1.5, 1.0])
    v = np.linspace(-M, M, 4001)[:, None] * xs[None]
    for eps in (0.05, 0.3, 1.0):
        true = math.ceil(M * B / eps)
        low = C.covering_estimates(v, eps)["lower"]
        assert true / 2 - 1 <= low <= true


def test_greedy_cover_properties():
    v = np.random.default_rng(7).normal(size=(200, 5))
    idx = C.greedy_cover(v, 1.0)
    d = np.abs(v[:, None] - v[idx][None]).max(-1)
    assert np.all(d.min(1) <= 1.0)  # a cover
    dc = np.abs(v[idx][:, None] - v[idx][None]).max(-1) + np.eye(len(idx)) * 9
    assert np.all(dc > 1.0)  # separated


def test_generalization_gap_matches_closed_form_population_error():
    # fixed classifier sign(x − 0.3) on x ~ N(0,1), label sign(x): error = Φ(0.3) − ½
    rng = np.random.default_rng(8)
    train = rng.normal(size=50)
    held = rng.normal(size=200_000)
    loss = lambda x: ((x > 0) != (x > 0.3)).astype(float)  # noqa: E731
    gap, se = C.generalization_gap(loss(train), loss(held))
    truth = norm.cdf(0.3) - 0.5 - loss(train).mean()
    assert abs(gap - truth) <= 4 * se


def test_linear_excess_risk_matches_monte_carlo_test_mse():
    fed = make_linear_federation(num_clients=3, dim=4, n_train=10, n_test=100_000, seed=0)
    w_hat = fed.w + 0.3
    exact = C.linear_excess_risk(w_hat, fed.w, fed.cov_diag)
    pred = np.einsum("ncd,nd->nc", fed.x_test, w_hat)
    mc = np.mean((fed.y_test - pred) ** 2, axis=1) - fed.noise_var
    np.testing.assert_allclose(exact, mc, rtol=0.05)  # MC over 1e5 points: rel. SE ~1%


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="radius"):
        C.rademacher_linear(np.ones((3, 2)), radius=-1, n_draws=10, seed=0)
    with pytest.raises(ValueError, match="p must"):
        C.dual_exponent(0.5)
    with pytest.raises(ValueError, match="widths"):
        C.rademacher_mlp_lower(np.ones((3, 2)), widths=[2, 3], spectral_bounds=[1, 1],
                               n_draws=4, seed=0)
    with pytest.raises(ValueError, match="exact enumeration"):
        C.rademacher_linear_exact(np.ones((25, 2)), radius=1.0)
    with pytest.raises(ValueError, match="eps"):
        C.covering_estimates(np.ones((3, 2)), 0.0)
