"""The sympy transcription of PLGU's bounds (verification/transcriptions/plgu.py) at points
worked out by hand from the paper's displays (docs/formulas.md §D.8), not from pfl_theory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.transcriptions import plgu as T


def test_clipped_log_and_lp_factor_by_hand():
    assert T.clipped_log(0.3) == T.clipped_log(2.0) == pytest.approx(math.log(2), rel=1e-15)
    assert T.clipped_log(7.0) == pytest.approx(math.log(7), rel=1e-15)
    assert T.lp_factor(1.0) == T.lp_factor(math.inf) == T.lp_factor(2.0) == 1.0
    assert T.lp_factor(1.5) == 1.0  # q = 3, exponent 1/2 − 2/3 < 0
    assert T.lp_factor(4.0) == pytest.approx((4 / 3) ** 0.25, rel=1e-15)  # q = 4/3


def test_lemma2_and_lemma3_by_hand():
    # 2 B √(d+1+log n) Π M / √m with B=1, ΠM = 6, m = 4, d = 1, n = e: 6√3
    v = T.lemma2_margin_complexity(B=1.0, spectral_bounds=[2.0, 3.0], m=4.0, d=1.0, n=math.e)
    assert v["margin"] == v["total"] == pytest.approx(6 * math.sqrt(3), rel=1e-14)
    # 24·1·(B+ρ)/(γ√m) √(Σ d_l d_{l−1} · log 3L) Π M: widths 2,3,4 → Σ = 6 + 12, L = 2
    v = T.lemma3_adversarial_complexity(B=1.5, rho=0.5, spectral_bounds=[2.0, 3.0],
                                        widths=[2, 3, 4], m=9.0, gamma=0.5, p=2.0)
    assert v["adversarial"] == pytest.approx(24 * 2.0 / 1.5 * math.sqrt(18 * math.log(6)) * 6,
                                             rel=1e-14)


def test_lemma4_blocks_by_hand():
    # L = 3, personalized = {layer 3} (index 2): D = 1, L − D = 2
    kw = dict(B=2.0, rho=0.5, spectral_bounds=[2.0, 3.0, 5.0], widths=[2, 3, 4, 5],
              personalized_layers=[2], m_hat=16.0, gamma=0.25, d=3.0, n=1.0, p=2.0)
    v = T.lemma4_personalized_complexity(**kw)
    assert v["margin"] == pytest.approx(2 * 2 * 2 * 30 / 4, rel=1e-14)  # √(d+1+log 1) = 2
    s_uni, s_per = 2 * 3 + 3 * 4, 4 * 5
    adv = (24 * math.sqrt(2) / (0.25 * 4) * 2 * math.sqrt(s_uni * math.log(3)) * 6
           * 2.5 * math.sqrt(s_per * math.log(6)) * 5)
    assert v["adversarial"] == pytest.approx(adv, rel=1e-14)
    assert v["total"] == pytest.approx(v["margin"] + adv, rel=1e-14)
    assert T.lemma4_personalized_complexity(**{**kw, "personalized_layers": []})["adversarial"] == 0


def test_theorem1_term4_and_total_by_hand():
    kw = dict(beta=2.0, B=2.0, rho=1.0, spectral_bounds=[2.0, 3.0, 5.0, 7.0], d=10.0,
              personalized_layers=[0, 3], m=100.0, N=5.0, m_hat=4.0, gamma=0.5)
    v = T.theorem1_plgu_lf(**kw)
    # D = 2, L − D = 2 (both logs clipped to log 2); Π_Per B M = 2²·14, Π_Uni (B+ρ) M = 3²·15
    t4 = 10 * 2 * 2 * math.log(2) * 4 * 14 * 9 * 15 / (0.5 * 5 * 2)
    assert v["personalized_adversarial"] == pytest.approx(t4, rel=1e-14)
    assert v["global_margin"] == pytest.approx(2 * 2 * 210 / (0.5 * 10), rel=1e-14)
    assert v["concentration"] == pytest.approx(2 * math.sqrt(math.log(2) / 100), rel=1e-14)
    inner = sum(v[k] for k in ("global_margin", "global_adversarial", "personalized_margin",
                               "personalized_adversarial"))
    assert v["total"] == pytest.approx(2 * inner + v["concentration"], rel=1e-14)


def test_theorems2_3_combinations_by_hand():
    v = T.theorem2_plgu_grep(beta=2.0, beta_h=3.0, beta_phi=5.0, B=1.0, rho=1.0, M_h=4.0,
                             spectral_bounds=[2.0, 2.0, 2.0, 2.0], d=3.0, N=4.0, m_hat=9.0,
                             gamma=0.5)
    assert v["head"] == pytest.approx(4 / (0.5 * 4 * 3), rel=1e-14)
    assert v["representation_adversarial"] == pytest.approx(
        2 * 3 * math.sqrt(4 * math.log(4)) * 16 / (0.5 * 4 * 3), rel=1e-14)
    assert v["total"] == pytest.approx(2 * (3 * v["head"] + 5 * (
        v["representation_margin"] + v["representation_adversarial"])) + v["concentration"])
    w = T.theorem3_plgu_ghn(beta=2.0, beta_v=3.0, beta_h=5.0, B=1.0, R=2.0, rho=1.0,
                            spectral_bounds=[2.0], hn_spectral_bounds=[3.0, 3.0], d_h=4.0,
                            N=16.0, m_hat=4.0, gamma=0.5)
    assert w["hn_adversarial"] == pytest.approx(3 * 4 * math.sqrt(2 * math.log(2)) * 9 / 2)
    assert w["total"] == pytest.approx(6 * w["descriptor"] + 5 * (w["hn_margin"] + w[
        "hn_adversarial"]) + 2 * math.sqrt(math.log(2) / 16), rel=1e-14)


def test_exact_rademacher_by_hand():
    # one sample: (M/1)‖x‖; two orthogonal unit vectors: ‖±e1 ± e2‖ = √2 always
    assert T.exact_rademacher_linear(np.array([[3.0, 4.0]]), 2.0) == pytest.approx((10.0, 0.0))
    mean, std = T.exact_rademacher_linear(np.eye(2), 3.0)
    assert mean == pytest.approx(3 / 2 * math.sqrt(2), rel=1e-15) and std < 1e-15
    assert T.linear_rademacher_bound(B=2.0, M=3.0, m=9.0) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        T.exact_rademacher_linear(np.ones((17, 2)), 1.0)
