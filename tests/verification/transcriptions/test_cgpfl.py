"""The CGPFL transcription (verification/transcriptions/cgpfl.py) against the identities the
specification derives and hand-computed values — independent of pfl_theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from verification.transcriptions import cgpfl as tx


def test_appendix_constants_reproduce_theorem41a():
    # §A.7 [DERIVED]: (3/2)C₁ = 48ρ_Ω²/K and (5/2)√(C₁C₃/T) = 80√(26ρ_Ω²L_G²δ²/K)/√(KNRT)
    assert sp.simplify(sp.Rational(3, 2) * tx.C1 - 48 * tx.rho_omega ** 2 / tx.k) == 0
    lhs = sp.Rational(5, 2) * sp.sqrt(tx.C1 * tx.C3 / tx.rounds)
    assert sp.simplify(lhs - tx.THEOREM41["variance_term"]) == 0


def test_alpha_hat0_entries_encode_their_dominations():
    # entry 1 = C₁α²/(4Δ_G); entry 2 = α√(C₁/C₂); entry 3 = α/(√416 L_G)
    e1, e2, e3 = tx.ALPHA_HAT0_ENTRIES
    assert sp.simplify(e1 - tx.C1 * tx.alpha ** 2 / (4 * tx.delta_gap)) == 0
    assert sp.simplify(e2 - tx.alpha * sp.sqrt(tx.C1 / tx.C2)) == 0
    assert sp.simplify(e3 - tx.alpha / (sp.sqrt(416) * tx.lipschitz_g)) == 0


def test_beta_max_is_the_stated_condition():
    assert tx.evaluate("beta_max", local_rounds=3, lipschitz_g=0.5) == pytest.approx(
        1 / (2 * math.sqrt(12) * 0.5))


def test_theorem42_by_hand():
    v = dict(m=1000.0, n_clients=20, d=10, k=4, confidence=0.05, lam=3.0, smoothness=2.0,
             cost_value=0.5, discrepancy=0.25)
    conf = 2 * math.sqrt(math.log(400) / 1000)
    comp = math.sqrt(40 / 1000 * math.log(math.e * 100))
    assert tx.evaluate("theorem42.confidence_term", **v) == pytest.approx(conf)
    assert tx.evaluate("theorem42.complexity_term", **v) == pytest.approx(comp)
    assert tx.evaluate("theorem42.personalization_term", **v) == pytest.approx(2.0)
    assert tx.evaluate("theorem42.total", **v) == pytest.approx(conf + comp + 2.25)
    assert tx.evaluate("e_of_k", **v, mu=2.0) == pytest.approx(comp + 1.0)


def test_weighted_sum_is_exact():
    # weights 1/4, 3/4; 2B λ_H = 2·2·0.5 = 2 and 2·2·0.25 = 1
    assert tx.weighted_sum([1, 3], [0.5, 0.25], [0.1, 0.2], 2.0) == pytest.approx(
        0.25 * (2.0 + 0.1) + 0.75 * (1.0 + 0.2), rel=1e-15)


def test_lower_level_equals_kmeans_over_n_and_means_minimise_it():
    rng = np.random.default_rng(0)
    theta, labels = rng.normal(size=(9, 2)), np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])
    means = tx.means_of_clusters(theta, labels, 3)
    kmeans = sum(float((theta[j] - means[labels[j]]) @ (theta[j] - means[labels[j]]))
                 for j in range(9)) / 9
    assert tx.lower_level(theta, means, labels) == pytest.approx(kmeans, rel=1e-14)
    assert tx.lower_level(theta, means + 0.01, labels) > tx.lower_level(theta, means, labels)
    # with the cluster means as Ω, cost (nearest centre) ≤ the lower level (assigned centre)
    assert tx.sample_weighted_cost(theta, means) <= tx.lower_level(theta, means, labels) + 1e-15


def test_copy_gradient_is_two_over_n_times_the_gap():
    w, th = np.array([[1.0, -2.0]]), np.array([[0.5, 1.0]])
    assert np.allclose(tx.copy_gradient(w, th, 4), [[0.25, -1.5]])


def test_set_partitions_count_is_a_stirling_number():
    assert [sum(1 for _ in tx.set_partitions(5, k)) for k in (1, 2, 3)] == [1, 15, 25]


def test_exact_costs_of_two_planted_pairs():
    x = np.array([[0.0], [1.0], [10.0], [11.0]])
    costs = tx.exact_costs(x, [1, 1, 1, 1], 3)
    assert costs[1] == pytest.approx(0.25) and costs[2] == pytest.approx(0.125)
    assert costs[0] == pytest.approx(np.var(x))
