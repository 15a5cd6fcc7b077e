"""Tests of pfl_theory.pfedme: Lemma 1, Lemma 2, Theorems 1–2, step sizes, corollaries."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from pfl_theory import pfedme as P


def sym_matrix(rng, d, lo, hi):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eig = rng.uniform(lo, hi, d)
    eig[0], eig[-1] = lo, hi
    return q @ np.diag(eig) @ q.T


# ---------------------------------------------------------------------------- Lemma 1
def test_lemma1_golden():
    # 2/(3+1)² (8/4 + 0.5) = 0.3125 ; 2/(3−1)² (8/4 + 0.5) = 1.25
    assert P.lemma1_delta_sq(lam=3, mu=1, gamma_f_sq=8, batch_size=4, nu=0.5) == 0.3125
    assert P.lemma1_delta_sq(lam=3, L=1, gamma_f_sq=8, batch_size=4, nu=0.5) == 1.25


def test_lemma1_monotone():
    d = lambda **k: P.lemma1_delta_sq(**{**dict(lam=3, mu=1, gamma_f_sq=8, batch_size=4,
                                                nu=0.5), **k})
    assert d(batch_size=8) < d() < d(nu=1.0)
    assert d(lam=6) < d() and d(mu=2) < d()
    assert P.lemma1_delta_sq(lam=3, L=2, gamma_f_sq=8, batch_size=4, nu=0.5) > \
        P.lemma1_delta_sq(lam=3, L=1, gamma_f_sq=8, batch_size=4, nu=0.5)


def _lemma1_mc(rng, *, lam, lo, hi, gamma_sq, batch, nu, reps=3000, d=4):
    """Plain numpy: noisy mini-batch quadratic, GD until ‖∇h̃‖² ≤ ν, vs exact prox."""
    A = sym_matrix(rng, d, lo, hi)
    b, w = rng.standard_normal(d), rng.standard_normal(d)
    exact = np.linalg.solve(A + lam * np.eye(d), b + lam * w)
    xi = rng.normal(0, math.sqrt(gamma_sq / d), (reps, batch, d)).mean(1)  # E‖ξ‖² = γ²/|D|
    theta = np.tile(w, (reps, 1))
    step = 1 / (lam + max(abs(lo), hi))
    for _ in range(10_000):
        grad = theta @ A - (b + xi) + lam * (theta - w)
        active = (grad ** 2).sum(1) > nu
        if not active.any():
            break
        theta -= step * grad * active[:, None]
    return ((theta - exact) ** 2).sum(1).mean()


@pytest.mark.parametrize("case", ["strongly_convex", "nonconvex"])
def test_lemma1_monte_carlo(case):
    rng = np.random.default_rng(11)
    lam, gamma_sq, batch, nu = 2.5, 3.0, 5, 0.02
    if case == "strongly_convex":
        mc = _lemma1_mc(rng, lam=lam, lo=0.7, hi=3.0, gamma_sq=gamma_sq, batch=batch, nu=nu)
        bound = P.lemma1_delta_sq(lam=lam, mu=0.7, gamma_f_sq=gamma_sq, batch_size=batch, nu=nu)
    else:
        mc = _lemma1_mc(rng, lam=lam, lo=-1.0, hi=1.0, gamma_sq=gamma_sq, batch=batch, nu=nu)
        bound = P.lemma1_delta_sq(lam=lam, L=1.0, gamma_f_sq=gamma_sq, batch_size=batch, nu=nu)
    # MC relative standard error with 3000 reps is ~3%; the bound holds with margin ≥ 2×
    assert 0.05 * bound < mc <= bound


# ---------------------------------------------------------------------------- Lemma 2
def test_lemma2_golden():
    assert P.gradient_diversity([[1.0, 0.0], [-1.0, 0.0]]) == 1.0
    assert P.sigma_F1_sq([[3.0, 4.0], [0.0, 0.0]]) == 12.5
    assert P.lemma2a_bound(lam=2, F_gap=0.5, sigma_F1_sq=1) == 4 * 2 * 0.5 + 2
    # λ = 4, L = 1: 2·16/(16 − 8) σ² = 4σ²; 8/(16 − 8) = 1
    assert P.sigma_F2_sq(lam=4, L=1, sigma_f_sq=0.5) == 2.0
    assert P.lemma2b_bound(lam=4, L=1, grad_F_norm_sq=3, sigma_f_sq=0.5) == 3 + 2.0
    assert P.sigma_F2_sq(lam=1e6, L=1, sigma_f_sq=1.0) == pytest.approx(2.0)  # λ → ∞ limit


def _envelope_grads(A, b, w, lam):
    """∇F_i(w) = λ(w − (A_i + λI)⁻¹(b_i + λw)) by eigendecomposition (independent route)."""
    out = []
    for Ai, bi in zip(A, b):
        ev, V = np.linalg.eigh(Ai)
        theta = V @ ((V.T @ (bi + lam * w)) / (ev + lam))
        out.append(lam * (w - theta))
    return np.array(out)


def _envelope_values(A, b, w, lam):
    vals = []
    for Ai, bi in zip(A, b):
        th = np.linalg.solve(Ai + lam * np.eye(len(w)), bi + lam * w)
        vals.append(0.5 * th @ Ai @ th - bi @ th + 0.5 * lam * np.sum((th - w) ** 2))
    return np.mean(vals)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.2, 20.0))
def test_lemma2a_on_heterogeneous_quadratics(seed, lam):
    rng = np.random.default_rng(seed)
    n, d = 6, 3
    A = np.stack([sym_matrix(rng, d, 0.3, 4.0) for _ in range(n)])
    b = rng.standard_normal((n, d)) * 2
    H = sum(lam * Ai @ np.linalg.inv(Ai + lam * np.eye(d)) for Ai in A)
    c = sum(lam * np.linalg.solve(Ai + lam * np.eye(d), bi) for Ai, bi in zip(A, b))
    w_star = np.linalg.solve(H, c)
    g_star = _envelope_grads(A, b, w_star, lam)
    assert np.abs(g_star.mean(0)).max() < 1e-10  # w* is stationary for F
    s1, F_star = P.sigma_F1_sq(g_star), _envelope_values(A, b, w_star, lam)
    for scale in (0.0, 1e-2, 1.0, 10.0):
        w = w_star + scale * rng.standard_normal(d)
        g = _envelope_grads(A, b, w, lam)
        gap = max(_envelope_values(A, b, w, lam) - F_star, 0.0)
        lhs = np.mean(np.sum((g - g.mean(0)) ** 2, 1))
        assert lhs <= P.lemma2a_bound(lam=lam, F_gap=gap, sigma_F1_sq=s1) * (1 + 1e-9)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), ratio=st.floats(2.9, 30.0))
def test_lemma2b_on_heterogeneous_quadratics(seed, ratio):
    # shared Hessian with eigenvalues in [−L, L] and heterogeneous b_i: A3 holds exactly
    # with σ_f² = (1/N)Σ‖b_i − b̄‖²; λ = ratio·L > 2√2 L
    rng = np.random.default_rng(seed)
    n, d, L = 5, 3, 1.0
    A = sym_matrix(rng, d, -L, L)
    b = rng.standard_normal((n, d))
    lam = ratio * L
    sigma_f_sq = np.mean(np.sum((b - b.mean(0)) ** 2, 1))
    for scale in (0.0, 1.0, 10.0):
        g = _envelope_grads([A] * n, b, scale * rng.standard_normal(d), lam)
        lhs = np.mean(np.sum((g - g.mean(0)) ** 2, 1))
        rhs = P.lemma2b_bound(lam=lam, L=L, grad_F_norm_sq=np.sum(g.mean(0) ** 2),
                              sigma_f_sq=sigma_f_sq)
        assert lhs <= rhs * (1 + 1e-9)


# ------------------------------------------------------------------------- Theorems
def test_theorem1a_golden():
    t = P.theorem1a(T=10, R=2, N=4, S=2, beta=2, lam=3, mu=1, delta_sq=0.01, sigma_F1_sq=0.5,
                    Delta0=2, check_conditions=False)
    # μ_F = 3/4, κ_F = 4, η̂₁ = 1/(6·3·(3 + 128·4/2)) = 1/4662
    assert t["initial"] == pytest.approx(2 * 0.75 * math.exp(-0.75 * 10 / (2 * 4662)), rel=1e-13)
    assert t["sampling"] == pytest.approx(1 / 60, rel=1e-13)
    assert t["drift"] == pytest.approx((2 * 0.5 + 0.09) * 4 / (2 * 15.0 ** 2), rel=1e-13)
    assert t["neighbourhood"] == pytest.approx(0.12, rel=1e-13)
    assert t.total == pytest.approx(sum(t.terms.values()), rel=1e-15)
    assert P.eta_hat_1(lam=3, mu=1, beta=2) == pytest.approx(1 / 4662, rel=1e-15)
    assert P.min_rounds_theorem1(lam=3, mu=1, beta=2) == pytest.approx(2 * 4662 / 0.75)


@pytest.mark.parametrize("r,den", [(1 / 3, 32), (2 / 3, 64)])
def test_theorem2a_golden(r, den):
    t = P.theorem2a(T=8, R=8, N=4, S=2, beta=8, lam=3, L=1, delta_sq=0.01, sigma_F2_sq=1,
                    Delta_F=8, r_exponent=r)
    # η̂₂ = 1/(75·27); drift = 8^(2/3)(8 + 0.09)^(1/3)/(8^(4/3) 8^r 8^(2/3))
    assert t["initial"] == pytest.approx(2025.0, rel=1e-13)
    assert t["sampling"] == pytest.approx(math.sqrt(24 / 32), rel=1e-13)
    assert t["drift"] == pytest.approx(8.09 ** (1 / 3) / den, rel=1e-12)
    assert t["neighbourhood"] == pytest.approx(0.09, rel=1e-13)
    assert P.eta_hat_2(lam=3, L=1) == pytest.approx(1 / 2025)
    assert P.local_step_bound(eta_hat=1 / 2025, beta=8, R=8) == pytest.approx(1 / (2025 * 64))


def test_theorem_b_parts_golden():
    t1 = P.theorem1b(F_gap=0.3, sigma_F1_sq=8, lam=2, delta_sq=0.1)
    assert dict(t1.terms) == {"optimality": 0.3, "diversity": 2.0, "approximation": 0.1}
    assert t1.total == pytest.approx(2.4)
    t2 = P.theorem2b(grad_norm_sq=1.0, sigma_F2_sq=9, lam=3, delta_sq=0.5)
    assert t2.total == pytest.approx(2.5)


KW1 = dict(R=5, N=20, beta=2.0, lam=15.0, mu=1.0, delta_sq=1e-3, sigma_F1_sq=1.0, Delta0=1.0)
KW2 = dict(R=5, N=20, beta=2.0, lam=5.0, L=1.0, delta_sq=1e-3, sigma_F2_sq=1.0, Delta_F=1.0)


def test_monotonicity_and_sampling_term():
    T = np.array([1e6, 1e7, 1e8])
    t1 = P.theorem1a(T=T, **KW1)
    assert np.all(np.diff(t1.total) < 0) and np.all(t1["sampling"] == 0)  # S = N
    s_small = P.theorem1a(T=1e6, S=5, **KW1)["sampling"]
    s_big = P.theorem1a(T=1e6, S=10, **KW1)["sampling"]
    assert s_small == pytest.approx(3 * s_big) and s_big > 0  # ∝ (N/S − 1)
    assert P.theorem1a(T=1e6, **{**KW1, "beta": 4.0})["drift"] < P.theorem1a(T=1e6, **KW1)["drift"]
    assert P.theorem1a(T=1e6, **{**KW1, "R": 50})["drift"] < P.theorem1a(T=1e6, **KW1)["drift"]
    t2 = P.theorem2a(T=T, **KW2)
    assert np.all(np.diff(t2["initial"]) < 0) and np.all(np.diff(t2["drift"]) < 0)
    assert np.all(t2["neighbourhood"] == t2["neighbourhood"]) and np.all(t2.total > 0)
    assert P.theorem2a(T=1e3, **{**KW2, "beta": 8.0})["drift"] < P.theorem2a(T=1e3, **KW2)["drift"]


def test_vectorised_equals_scalar_loop():
    T = np.array([1e6, 3e6, 1e7])
    vec = P.theorem1a(T=T, **KW1)
    for i, t in enumerate(T):
        sc = P.theorem1a(T=float(t), **KW1)
        for k in sc.terms:
            assert vec[k].shape == T.shape and vec[k][i] == pytest.approx(sc[k], rel=1e-14)


@settings(max_examples=10, deadline=None)
@given(T=st.integers(1, 10**6), R=st.integers(1, 50), N=st.integers(1, 500),
       beta=st.floats(1.0, 50.0), lam=st.floats(3.0, 60.0), mu=st.floats(0.01, 10.0),
       dsq=st.floats(0.0, 1.0), ssq=st.floats(0.0, 10.0), r=st.sampled_from([1 / 3, 2 / 3]))
def test_numeric_matches_symbolic_and_nonnegative(T, R, N, beta, lam, mu, dsq, ssq, r):
    sym = P.SYMBOLS
    S = max(1, N // 2)
    subs = {sym["T"]: T, sym["R"]: R, sym["N"]: N, sym["S"]: S, sym["beta"]: beta,
            sym["lambda"]: lam, sym["mu"]: mu, sym["delta_sq"]: dsq, sym["sigma_sq"]: ssq,
            sym["Delta_0"]: 1.5, sym["Delta_F"]: 1.5}
    t1 = P.theorem1a(T=T, R=R, N=N, S=S, beta=beta, lam=lam, mu=mu, delta_sq=dsq,
                     sigma_F1_sq=ssq, Delta0=1.5, check_conditions=False)
    for k, e in P.theorem1a_symbolic().items():
        assert t1[k] >= 0
        assert t1[k] == pytest.approx(float(e.xreplace(subs).evalf(30)), rel=1e-10, abs=1e-300)
    t2 = P.theorem2a(T=T, R=R, N=N, S=S, beta=beta, lam=lam, L=1.0, delta_sq=dsq,
                     sigma_F2_sq=ssq, Delta_F=1.5, r_exponent=r)
    for k, e in P.theorem2a_symbolic(sp.nsimplify(r)).items():
        assert t2[k] >= 0
        assert t2[k] == pytest.approx(float(e.xreplace(subs).evalf(30)), rel=1e-10, abs=1e-300)


# ---------------------------------------------------------------------- Corollaries
def test_corollary_choices_golden():
    assert P.corollary1_beta(N=100, T=4, R=3) == (5.0, "i")  # √(100/4)
    assert P.corollary1_beta(N=100, T=4, R=3, reading="sqrt(N)/T") == (2.5, "i")
    assert P.corollary1_beta(N=4, T=100, R=3) == (12.0, "ii")  # NR
    assert P.corollary1_beta(N=100, T=20, R=3, reading="sqrt(N)/T") == (300.0, "ii")
    assert P.corollary2_choice(N=16, R=16) == (8.0, 65536.0)  # 4·2, (256)²


# ----------------------------------------------------------------------- validation
@pytest.mark.parametrize("kwargs,match", [
    (dict(lam=0, mu=1), "lam"), (dict(lam=1, mu=-1), "mu"), (dict(lam=1, L=1), "lam > L"),
    (dict(lam=1, mu=1, L=0.1), "exactly one"), (dict(lam=1), "exactly one"),
    (dict(lam=1, mu=1, batch_size=0), "batch_size"), (dict(lam=1, mu=1, nu=-1), "nu"),
])
def test_lemma1_validation(kwargs, match):
    base = dict(gamma_f_sq=1, batch_size=2, nu=0.1)
    with pytest.raises(ValueError, match=match):
        P.lemma1_delta_sq(**{**base, **kwargs})


def test_validation_errors():
    with pytest.raises(ValueError, match="2\\*sqrt\\(2\\)"):
        P.sigma_F2_sq(lam=2.8, L=1, sigma_f_sq=1)  # 2.8 ≤ 2√2 ≈ 2.83
    with pytest.raises(ValueError, match="2\\*sqrt\\(2\\)"):
        P.lemma2b_bound(lam=2.0, L=1, grad_F_norm_sq=1, sigma_f_sq=1)
    with pytest.raises(ValueError, match="F_gap"):
        P.lemma2a_bound(lam=1, F_gap=-1, sigma_F1_sq=1)
    with pytest.raises(ValueError, match="dimension"):
        P.gradient_diversity([1.0, 2.0])
    with pytest.raises(ValueError, match="T >= 2"):
        P.theorem1a(T=10, **KW1)
    with pytest.raises(ValueError, match="beta"):
        P.theorem1a(T=1e9, **{**KW1, "beta": 0.5})
    with pytest.raises(ValueError, match="S must be <= N"):
        P.theorem1a(T=1e9, S=30, **KW1)
    with pytest.raises(ValueError, match="R"):
        P.theorem1a(T=1e9, **{**KW1, "R": 0})
    with pytest.raises(ValueError, match="integer"):
        P.theorem2a(T=10.5, **KW2)
    with pytest.raises(ValueError, match="sqrt\\(8L\\^2\\+1\\)"):
        P.theorem2a(T=10, **{**KW2, "lam": 2.9})
    with pytest.raises(ValueError, match="r_exponent"):
        P.theorem2a(T=10, r_exponent=0, **KW2)
    with pytest.raises(ValueError, match="mu"):
        P.eta_hat_1(lam=1, mu=0, beta=1)
    with pytest.raises(ValueError, match="reading"):
        P.corollary1_beta(N=1, T=1, R=1, reading="N/T")
    with pytest.raises(ValueError, match="N"):
        P.corollary2_choice(N=0, R=1)
    # conditions can be waived explicitly
    assert P.theorem2a(T=10, check_conditions=False, **{**KW2, "lam": 2.9}).total > 0
