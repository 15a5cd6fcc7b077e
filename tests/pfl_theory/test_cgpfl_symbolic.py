"""Theorem 4.1 constants via sympy (E.A.9) and agreement of the numeric bound with the
symbolic form; headline rate O(1/√(KNRT))."""

import math

import numpy as np
import pytest
import sympy as sp

from pfl_theory import cgpfl_symbolic as cs
from pfl_theory.cgpfl import theorem41_bound, theorem41_stepwise


def test_constant_identities_are_zero():
    for name, diff in cs.constant_identities().items():
        assert sp.simplify(diff) == 0, name


def test_constants_48_and_80_sqrt26_from_appendix_constants():
    c = cs.appendix_constants()
    s = cs.SYMBOLS
    assert sp.simplify(sp.Rational(3, 2) * c["C1"] * s["k"] / s["rho_omega"] ** 2) == 48
    ratio = sp.Rational(5, 2) * sp.sqrt(c["C1"] * c["C3"]) * s["k"] * sp.sqrt(s["n_clients"] * s["local_rounds"])
    ratio = sp.simplify(ratio / (s["rho_omega"] * s["lipschitz_g"] * s["inexactness"]))
    assert ratio == 80 * sp.sqrt(26)
    assert sp.sqrt(32 * 832) == 32 * sp.sqrt(26)  # the arithmetic behind it


def test_numeric_bound_agrees_with_symbolic():
    rng = np.random.default_rng(0)
    s = cs.SYMBOLS
    expr = cs.theorem41_expression()
    step = cs.stepwise_expression()
    for _ in range(5):
        p = dict(alpha=rng.uniform(0.1, 1), rho_omega=rng.uniform(0.1, 5), rho_g=rng.uniform(0.1, 5),
                 lipschitz_g=rng.uniform(0.1, 5), inexactness=rng.uniform(0.01, 1),
                 k=int(rng.integers(1, 6)), n_clients=int(rng.integers(6, 50)),
                 local_rounds=int(rng.integers(1, 20)), rounds=int(rng.integers(1, 1000)),
                 delta_gap=rng.uniform(0.1, 5))
        b = theorem41_bound(**p)
        subs = {s[key]: val for key, val in p.items()}
        sym_entries = [float(e.subs(subs)) for e in cs.alpha_hat0_entries()]
        assert b.alpha_hat0_entries == pytest.approx(sym_entries, rel=1e-12)
        subs[s["alpha_hat0"]] = b.alpha_hat0
        assert b.generalized == pytest.approx(float(expr.subs(subs)), rel=1e-12)
        ah = 0.5 * b.alpha_hat0
        subs[s["alpha_hat"]] = ah
        assert theorem41_stepwise(alpha_hat=ah, **p) == pytest.approx(float(step.subs(subs)), rel=1e-12)


def test_headline_rate_exponents():
    ex = cs.rate_exponents()
    assert ex == {"K": sp.Rational(-1, 2), "N": sp.Rational(-1, 2), "R": sp.Rational(-1, 2), "T": sp.Rational(-1, 2)}
    assert cs.rate_exponents(cs.headline_rate()) == ex
    # numerically: the variance term with ρ_Ω²/K fixed scales like (KNRT)^(-1/2)
    base = dict(alpha=1.0, rho_g=1.0, lipschitz_g=1.0, inexactness=0.1, n_clients=40,
                local_rounds=10, rounds=100, delta_gap=1.0)
    v1 = theorem41_bound(**base, k=1, rho_omega=1.0).variance_term
    v4 = theorem41_bound(**base, k=4, rho_omega=2.0).variance_term  # ρ_Ω² = K·1
    assert v4 / v1 == pytest.approx(1 / math.sqrt(4), rel=1e-12)
