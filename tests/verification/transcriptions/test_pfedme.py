"""The pFedMe transcription (verification/transcriptions/pfedme.py) against hand-computed
values and the limits the paper states — independent of pfl_theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from verification.transcriptions import pfedme as tx


def test_proposition1_constants():
    assert sp.simplify(tx.KAPPA_F - (tx.lam + tx.mu) / tx.mu) == 0


def test_lemma1_by_hand():
    # λ=3, μ=1, L=2, γ²=4, |D|=2, ν=1: γ²/|D| + ν = 3; 2/16·3 and 2/1·3
    v = dict(lam=3.0, mu=1.0, L=2.0, gamma_f_sq=4.0, batch_size=2.0, nu=1.0)
    assert tx.evaluate("lemma1_delta_sq.mu", **v) == pytest.approx(0.375, rel=1e-15)
    assert tx.evaluate("lemma1_delta_sq.L", **v) == pytest.approx(6.0, rel=1e-15)


def test_lemma2b_has_the_stated_large_lambda_limit():
    # §B.5: as λ → ∞ the diversity bound tends to 2σ_f² with no ‖∇F‖² term
    assert sp.limit(tx.LEMMA2B, tx.lam, sp.oo) == 2 * tx.sigma_f_sq
    v = dict(lam=6.0, L=1.5, grad_F_norm_sq=2.0, sigma_f_sq=0.5)  # λ² − 8L² = 18
    assert tx.evaluate("lemma2b_bound", **v) == pytest.approx(8 * 2.25 / 18 * 2 + 2 * 36 / 18 * 0.5)


def test_step_sizes_by_hand():
    # λ=2, μ=2, β=4: κ_F = 2, η̂₁ = 1/(12·(3 + 64)) ; μ_F = 1, T_min = 2/η̂₁
    v = dict(lam=2.0, mu=2.0, beta=4.0, R=5.0, eta_hat=0.1)
    assert tx.evaluate("eta_hat_1", **v) == pytest.approx(1 / 804)
    assert tx.evaluate("min_rounds_theorem1", **v) == pytest.approx(1608)
    assert tx.evaluate("eta_hat_2", lam=2.0) == pytest.approx(1 / 600)
    assert tx.evaluate("local_step_bound", **v) == pytest.approx(0.005)


def test_theorem1a_at_its_horizon_and_without_sampling():
    v = dict(lam=2.0, mu=2.0, beta=4.0, R=5.0, N=10.0, S=10.0, delta_sq=0.1,
             sigma_F1_sq=1.0, Delta0=3.0)
    t_min = float(tx.evaluate("min_rounds_theorem1", **v))
    assert tx.evaluate("theorem1a.initial", **v, T=t_min) == pytest.approx(3.0 * math.exp(-1))
    assert tx.evaluate("theorem1a.sampling", **v, T=t_min) == 0.0  # S = N
    assert tx.evaluate("theorem1a.neighbourhood", **v, T=t_min) == pytest.approx(0.4)
    total = sum(float(tx.evaluate(f"theorem1a.{k}", **v, T=t_min)) for k in tx.THEOREM1A)
    assert tx.evaluate("theorem1a.total", **v, T=t_min) == pytest.approx(total)


def test_theorem2a_drift_with_the_corollary2_choice():
    # β = N^{1/2}R^{1/4}, r = 1/3: the drift decays as N^{-2/3} R^{-1/3} T^{-2/3} for large R
    drift = tx.THEOREM2A["drift"].subs({tx.beta: tx.COROLLARY2_BETA,
                                        tx.r_exponent: sp.Rational(1, 3)})
    big = {tx.R: 10**12, tx.N: 3, tx.T: 5, tx.Delta_F: 1, tx.sigma_F2_sq: 1, tx.lam: 1,
           tx.delta_sq: 1}
    ratio = (drift.subs({**big, tx.R: 8 * 10**12}) / drift.subs(big)).evalf(30)
    assert float(ratio) == pytest.approx(8 ** (-1 / 3), rel=1e-9)


def test_corollaries():
    assert sp.simplify(tx.COROLLARY2_T - (tx.N * tx.R) ** 2) == 0
    assert tx.evaluate("corollary1_beta.sqrt(N/T)", N=100, T=4, R=3) == pytest.approx(5.0)
    assert tx.evaluate("corollary1_beta.sqrt(N/T)", N=4, T=100, R=3) == pytest.approx(12.0)
    assert tx.evaluate("corollary1_beta.sqrt(N)/T", N=100, T=4, R=3) == pytest.approx(2.5)
    assert tx.evaluate("corollary1_beta.sqrt(N)/T", N=100, T=20, R=3) == pytest.approx(300.0)
    assert tx.corollary1_regime("sqrt(N/T)", N=100, T=4) == "i"
    assert tx.corollary1_regime("sqrt(N)/T", N=100, T=20) == "ii"


def test_gradient_statistics_by_hand():
    g = np.array([[1.0, 0.0], [3.0, 2.0]])  # mean (2, 1): deviations (∓1, ∓1)
    assert tx.mean_squared_norm(g) == pytest.approx((1 + 13) / 2)
    assert tx.diversity(g) == pytest.approx(2.0)


def test_evaluate_names_missing_arguments():
    with pytest.raises(KeyError, match="needs"):
        tx.evaluate("eta_hat_1", lam=1.0)
    assert tx.arguments("eta_hat_1") == ("beta", "lam", "mu")
