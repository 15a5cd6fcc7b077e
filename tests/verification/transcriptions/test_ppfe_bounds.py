"""The sympy transcription of PPFE's bounds (verification/transcriptions/ppfe_bounds.py) at
points worked out by hand from docs/formulas.md §C.5.3–C.5.12, and Lemma 9 against brute
force — not against pfl_theory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.transcriptions import ppfe_bounds as T


def test_stage_counts_and_theorem7_by_hand():
    # layers of [2, 3, 1]: 3·(2+1) = 9 and 1·(3+1) = 4; stage 1 personalizes the last layer
    assert T.stage_parameter_counts([[2, 3, 1], [2, 3, 1]]) == ([13.0, 9.0], [0.0, 4.0])
    # sizes 2, 4, 4: 1/n̄ = (1/2 + 1/4 + 1/4)/3 ⇒ n̄ = 3, N = 3; δ = 1/e ⇒ log(1/δ) = 1
    v = T.theorem7_terms([[2, 3, 1], [2, 3, 1]], sizes=[2, 4, 4], delta=math.exp(-1))
    assert v["shared"] == pytest.approx(math.sqrt(2 * 22 / 9), rel=1e-14)
    assert v["personalized"] == pytest.approx(math.sqrt(2 * 4 / 3), rel=1e-14)
    assert v["boosting"] == pytest.approx(math.sqrt(2 / 3), rel=1e-14)
    assert v["confidence"] == pytest.approx(1 / 3, rel=1e-14)
    assert v["total"] == pytest.approx(sum(v[k] for k in ("shared", "personalized", "boosting",
                                                          "confidence")), rel=1e-15)
    w = T.theorem7_terms([[2, 3, 1], [2, 3, 1]], sizes=[2, 4, 4], delta=math.exp(-1),
                         depth_factor=False)
    assert w["shared"] == pytest.approx(v["shared"] / math.sqrt(2), rel=1e-14)


def test_s_t_and_corollary2_by_hand():
    assert T.s_t(3, 0.5) == pytest.approx(0.25 + 2 * 0.0625, rel=1e-14)
    assert T.s_t(4, 1.0) == 6.0 and T.s_t(1, 0.5) == 0.0
    assert T.s_t(9, 0.9) == pytest.approx(sum(t * 0.81 ** t for t in range(1, 9)), rel=1e-13)
    assert T.s_t(60, 0.7) <= 0.49 / (1 - 0.49) ** 2  # the bound S_T ≤ γ²/(1−γ²)²
    v = T.corollary2_terms(width=4.0, depth=2, num_stages=3, n=9.0, num_clients=6,
                           gamma_w=0.5, delta=math.exp(-1))
    assert v["shared"] == pytest.approx(4 * math.sqrt(6 / 54), rel=1e-14)
    assert v["personalized"] == pytest.approx(4 * math.sqrt(0.375 / 9), rel=1e-14)
    assert v["confidence"] == pytest.approx(math.sqrt(1 / 54), rel=1e-14)


def test_kappa_dagger_and_lemma9_against_brute_force():
    assert float(T.U_DAGGER) == pytest.approx(1.25643, abs=1e-5)  # e^u = 1 + 2u
    assert math.exp(float(T.U_DAGGER)) == pytest.approx(1 + 2 * float(T.U_DAGGER), rel=1e-14)
    assert T.KAPPA_DAGGER_VALUE == pytest.approx(3.13395, abs=1e-5)
    # the spec's numerical example (a, b, c) = (1, 1e-4, 1): u* = 6.2115, φ_min = 0.026929
    r = T.lemma9_minimize(1.0, 1e-4, 1.0)
    assert r["u_star"] == pytest.approx(6.2115, abs=1e-4)
    assert r["value"] == pytest.approx(0.026929, abs=1e-6)
    for a, b, c in [(1.0, 1e-4, 1.0), (0.7, 0.05, 2.0), (1.0, 0.3, 1.0), (2.0, 5.0, 0.5)]:
        xs = c * np.exp(-np.linspace(0, 30, 600_001))
        phi = a * xs + np.sqrt(b * np.log(c / xs))
        got = T.lemma9_minimize(a, b, c)
        assert got["value"] == pytest.approx(phi.min(), rel=1e-8)
        assert got["interior"] == float(phi.argmin() > 0)


def test_lemma9_asymptotic_by_hand():
    k = 2 * 1.0 * 1.0 / math.sqrt(1e-6)
    v = T.lemma9_asymptotic(1.0, 1e-6, 1.0)
    u2 = math.log(k) + 0.5 * math.log(math.log(k))
    assert v["u_star"] == pytest.approx(u2, rel=1e-15)
    assert v["x_star"] == pytest.approx(1e-3 / (2 * math.sqrt(u2)), rel=1e-14)


def test_adaboost_chain_kappa0_edge_by_hand():
    v = T.adaboost_bound_chain([0.25, 0.4])
    assert v["product"][0] == pytest.approx(2 * math.sqrt(0.1875), rel=1e-15)
    assert v["product"][1] == pytest.approx(2 * math.sqrt(0.1875) * 2 * math.sqrt(0.24), rel=1e-15)
    assert v["exp_sum"][1] == pytest.approx(math.exp(-2 * (0.0625 + 0.01)), rel=1e-15)
    assert v["exp_gamma"][1] == pytest.approx(math.exp(-2 * 0.01 * 2), rel=1e-14)
    assert np.all(v["product"] <= v["exp_sum"]) and np.all(v["exp_sum"] <= v["exp_gamma"])
    assert T.kappa0_from_ingredients(loss_bound=2.0, coef_bound=1.0, eps_alpha=0.5) == \
        pytest.approx(2 * math.sqrt(math.log(3) / 2), rel=1e-15)
    assert T.stage_edge([0.2, 0.3]) == pytest.approx(0.2, rel=1e-15)
    assert T.stage_edge([0.25], num_classes=4) == pytest.approx(1 / 3, rel=1e-15)


def test_select_stages_brute_force_and_continuous_optimum():
    s = T.select_stages(gamma=0.3, kappa0=0.5, n=100.0, t_max=40)
    curve = np.exp(-2 * 0.09 * np.arange(1, 41)) + 0.5 * np.sqrt(np.arange(1, 41) / 100)
    assert s["t_star"] == 1 + int(np.argmin(curve)) and s["interior"] == 1.0
    u2 = 2 * 0.09 * s["t_star_continuous"]
    assert math.exp(u2) / math.sqrt(u2) == pytest.approx(s["kappa"], rel=1e-12) and u2 > 0.5
    assert s["b_prime"] == pytest.approx(0.25 / (2 * 0.09 * 100), rel=1e-15)
