"""Tests of pfl_theory/plgu.py — PLGU Lemmas 2–4, Theorems 1–3 (§E.D7) and Rademacher sanity (§E.D8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pfl_theory import plgu as P

LOG2, LOG3 = math.log(2), math.log(3)


# ------------------------------------------------------------------ golden values (by hand)
def test_lp_factor_and_clipped_log():
    assert P.lp_factor(2) == 1.0 and P.lp_factor(math.inf) == 1.0 and P.lp_factor(1) == 1.0
    assert P.lp_factor(1.5) == 1.0  # q = 3, exponent −1/6 < 0
    assert math.isclose(P.lp_factor(4), (4 / 3) ** 0.25, rel_tol=1e-15)
    np.testing.assert_allclose(P.clipped_log([0, 1, 2, 5]), [LOG2, LOG2, LOG2, math.log(5)])


def test_theorem1_golden():
    r = P.theorem1_plgu_lf(beta=2, B=1, rho=0.5, spectral_bounds=[2, 1, 1], d=4,
                           personalized_layers=[0], m=100, N=4, m_hat=25, gamma=0.5)
    want = {
        "global_margin": 2 * math.sqrt(3) / 5,
        "global_adversarial": 1.5 * 4 * math.sqrt(3 * math.log(3)) * 2 / 5,
        "personalized_margin": 2 * math.sqrt(3) / 10,
        # d D(L−D) √log max(1,2) · (B·2) · √log 2 · (1.5·1)(1.5·1) / (γ N √m̂)
        "personalized_adversarial": 4 * 1 * 2 * LOG2 * 2 * 2.25 / 10,
        "concentration": 2 * math.sqrt(LOG2 / 100),
    }
    for k, v in want.items():
        assert math.isclose(r.terms[k], v, rel_tol=1e-13), k
    total = 2 * sum(v for k, v in want.items() if k != "concentration") + want["concentration"]
    assert math.isclose(r.total, total, rel_tol=1e-13)


def test_lemmas_golden():
    assert math.isclose(P.lemma2_margin_complexity(B=2, spectral_bounds=[3, 0.5], m=16, d=3, n=4).total,
                        2 * 2 * math.sqrt(4 + math.log(4)) * 1.5 / 4, rel_tol=1e-14)
    l3 = P.lemma3_adversarial_complexity(B=1, rho=1, spectral_bounds=[1, 1], widths=[2, 3, 1],
                                         m=4, gamma=0.5)
    assert math.isclose(l3.total, 144 * math.sqrt(math.log(6)), rel_tol=1e-14)
    l4 = P.lemma4_personalized_complexity(B=1, rho=1, spectral_bounds=[2, 3], widths=[2, 3, 1],
                                          personalized_layers=[1], m_hat=4, gamma=0.5, d=3, n=2)
    assert math.isclose(l4.terms["margin"], 6 * math.sqrt(4 + LOG2), rel_tol=1e-14)
    assert math.isclose(l4.terms["adversarial"], 288 * math.sqrt(18) * LOG3, rel_tol=1e-13)
    assert math.isclose(l4.total, l4.terms["margin"] + l4.terms["adversarial"], rel_tol=1e-15)


def test_theorem2_and_3_golden():
    r2 = P.theorem2_plgu_grep(beta=2, beta_h=3, beta_phi=5, B=1, rho=1, M_h=2,
                              spectral_bounds=[2, 2, 1], d=10, N=4, m_hat=9, gamma=0.5)
    den = 0.5 * 4 * 3
    want2 = {"head": 2 / den, "representation_margin": math.sqrt(3) * 4 / den,
             "representation_adversarial": 2 * 10 * math.sqrt(3 * math.log(3)) * 4 / den,
             "concentration": 2 * math.sqrt(LOG2 / 4)}
    for k, v in want2.items():
        assert math.isclose(r2.terms[k], v, rel_tol=1e-13), k
    assert math.isclose(r2.total, 2 * (3 * want2["head"] + 5 * (want2["representation_margin"]
                        + want2["representation_adversarial"])) + want2["concentration"], rel_tol=1e-13)
    r3 = P.theorem3_plgu_ghn(beta=2, beta_v=3, beta_h=5, B=1, R=2, rho=1, spectral_bounds=[1, 2],
                             hn_spectral_bounds=[1, 1, 1, 1], d_h=7, N=16, m_hat=4, gamma=0.5)
    want3 = {"descriptor": math.sqrt(2) * 2 / (0.5 * 16 * 2), "hn_margin": 2 * 2 / (0.5 * 4),
             "hn_adversarial": 3 * 7 * math.sqrt(4 * math.log(4)) / (0.5 * 4),
             "concentration": 2 * math.sqrt(LOG2 / 16)}
    for k, v in want3.items():
        assert math.isclose(r3.terms[k], v, rel_tol=1e-13), k
    assert math.isclose(r3.total, 6 * want3["descriptor"] + 5 * (want3["hn_margin"]
                        + want3["hn_adversarial"]) + want3["concentration"], rel_tol=1e-13)


# ------------------------------------------------------------------ §E.D7 monotonicity, edge cases
@st.composite
def _net(draw):
    L = draw(st.integers(1, 6))
    M = draw(st.lists(st.floats(0.3, 3.0), min_size=L, max_size=L))
    per = draw(st.lists(st.integers(0, L - 1), unique=True, max_size=L))
    return M, per


@settings(max_examples=40, deadline=None)
@given(net=_net(), B=st.floats(0.1, 5), beta=st.floats(0.1, 3), gamma=st.floats(0.01, 0.9))
def test_theorem1_monotone(net, B, beta, gamma):
    M, per = net
    base = dict(beta=beta, B=B, rho=0.1, spectral_bounds=M, d=8, personalized_layers=per,
                m=1000.0, N=10.0, m_hat=50.0, gamma=gamma)
    grid = np.array([1.0, 2.0, 4.0, 8.0])
    for key, direction in (("rho", 1), ("m", -1), ("N", -1), ("m_hat", -1)):
        tot = P.theorem1_plgu_lf(**{**base, key: base[key] * grid}).total
        assert np.all(direction * np.diff(tot) > 0), key
    # ρ enters only the adversarial terms
    r0, r1 = (P.theorem1_plgu_lf(**{**base, "rho": r}) for r in (0.0, 1.0))
    for k in ("global_margin", "personalized_margin", "concentration"):
        assert r0.terms[k] == r1.terms[k]


@settings(max_examples=30, deadline=None)
@given(M=st.lists(st.floats(0.3, 3.0), min_size=1, max_size=5), gamma=st.floats(0.01, 0.9))
def test_theorems_2_3_monotone_and_independent_of_m(M, gamma):
    grid = np.array([1.0, 3.0, 9.0])
    b2 = dict(beta=1, beta_h=1, beta_phi=1, B=1, rho=0.1, M_h=2, spectral_bounds=M, d=5,
              N=10.0, m_hat=40.0, gamma=gamma)
    b3 = dict(beta=1, beta_v=1, beta_h=1, B=1, R=1, rho=0.1, spectral_bounds=M,
              hn_spectral_bounds=M, d_h=5, N=10.0, m_hat=40.0, gamma=gamma)
    for fn, base in ((P.theorem2_plgu_grep, b2), (P.theorem3_plgu_ghn, b3)):
        for key, direction in (("rho", 1), ("N", -1), ("m_hat", -1)):
            tot = fn(**{**base, key: base[key] * grid}).total
            assert np.all(direction * np.diff(tot) > 0), (fn.__name__, key)
        with pytest.raises(TypeError):  # no dependence on m: not even an argument
            fn(**base, m=100)


def test_personalized_adversarial_vanishes_only_at_extremes():
    M = [1.2, 0.9, 1.1, 1.0, 1.3]
    L = len(M)
    for D in range(L + 1):
        per = list(range(D))
        t4 = P.theorem1_plgu_lf(beta=1, B=1, rho=0.1, spectral_bounds=M, d=4, personalized_layers=per,
                                m=100, N=5, m_hat=20, gamma=0.1).terms["personalized_adversarial"]
        l4 = P.lemma4_personalized_complexity(B=1, rho=0.1, spectral_bounds=M, widths=[3] * (L + 1),
                                              personalized_layers=per, m_hat=20, gamma=0.1, d=3, n=3)
        assert math.isfinite(t4) and math.isfinite(l4.total)
        assert (t4 == 0) == (D in (0, L)) and (l4.terms["adversarial"] == 0) == (D in (0, L))


def test_grid_equals_scalar_calls():
    rhos, ms = np.array([0.0, 0.05, 0.5]), np.array([[100.0], [1000.0]])
    kw = dict(beta=1, B=1, spectral_bounds=[1.5, 1.2, 0.8], d=6, personalized_layers=[2],
              N=10, m_hat=30, gamma=0.05)
    grid = P.theorem1_plgu_lf(rho=rhos, m=ms, **kw)
    assert grid.total.shape == (2, 3) and grid.terms["concentration"].shape == (2, 3)
    for i in range(2):
        for j in range(3):
            one = P.theorem1_plgu_lf(rho=float(rhos[j]), m=float(ms[i, 0]), **kw)
            assert math.isclose(grid.total[i, j], one.total, rel_tol=1e-15)


@pytest.mark.parametrize("kw,msg", [
    ({"gamma": 1.0}, "gamma"), ({"gamma": 0.0}, "gamma"), ({"rho": -0.1}, "rho"),
    ({"m": 0}, "m must"), ({"personalized_layers": [3]}, "personalized_layers"),
    ({"personalized_layers": [0, 0]}, "personalized_layers"), ({"spectral_bounds": []}, "spectral"),
    ({"spectral_bounds": [1, -1, 1]}, "spectral"), ({"B": float("nan")}, "B"),
])
def test_theorem1_validation(kw, msg):
    base = dict(beta=1, B=1, rho=0.1, spectral_bounds=[1, 1, 1], d=4, personalized_layers=[0],
                m=100, N=5, m_hat=20, gamma=0.1)
    with pytest.raises(ValueError, match=msg):
        P.theorem1_plgu_lf(**{**base, **kw})


def test_lemma_validation():
    with pytest.raises(ValueError, match="widths"):
        P.lemma3_adversarial_complexity(B=1, rho=0, spectral_bounds=[1, 1], widths=[2, 2], m=4, gamma=0.5)
    with pytest.raises(ValueError, match="p must"):
        P.lp_factor(0.5)


# ------------------------------------------------------------------ §E.D8 Rademacher sanity
def test_rademacher_orthogonal_samples_attain_bound_exactly():
    m, B, M = 16, 2.0, 3.0
    x = B * np.eye(m)  # ‖Σ ε_j x_j‖ = B √m for every sign vector
    est, se = P.empirical_rademacher_linear(x, M=M, n_draws=50, seed=0)
    assert math.isclose(est, P.linear_rademacher_bound(B=B, M=M, m=m), rel_tol=1e-14) and se < 1e-12


def test_rademacher_depth1_below_bound_and_slope_minus_half():
    rng = np.random.default_rng(1)
    B, M, ms = 1.5, 2.0, np.array([32, 128, 512, 2048])
    ests = []
    for m in ms:
        x = rng.normal(size=(m, 3))
        x *= B / np.linalg.norm(x, axis=1, keepdims=True)
        est, se = P.empirical_rademacher_linear(x, M=M, n_draws=1000, seed=int(m))
        assert est <= P.linear_rademacher_bound(B=B, M=M, m=m) + 3 * se  # 3 SE: Monte-Carlo noise
        lemma2 = P.lemma2_margin_complexity(B=B, spectral_bounds=[M], m=m, d=1, n=3).total
        assert est <= lemma2  # Lemma 2's explicit constant is looser still
        ests.append(est)
    slope = np.polyfit(np.log(ms), np.log(ests), 1)[0]
    assert abs(slope + 0.5) < 0.05  # 1000 draws, SE ~1-2% per point over a 64x range of m


def test_rademacher_is_seeded():
    x = np.random.default_rng(0).normal(size=(20, 4))
    assert P.empirical_rademacher_linear(x, M=1, n_draws=10, seed=3) == \
        P.empirical_rademacher_linear(x, M=1, n_draws=10, seed=3)
