"""Tests of pfl_theory.rates: headline rates, power_exponents, corollary derivations."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from pfl_theory import pfedme, rates

T, R, N, K = (rates.RATE_SYMBOLS[k] for k in "TRNK")


def slope(xs, ys):
    """Least-squares log-log slope (independent of the sympy route)."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


# ------------------------------------------------------------------------- headline
def test_headline_rate_values_golden():
    assert rates.headline_rate("pfedme.linear_speedup", T=2, R=3, N=5) == pytest.approx(1 / 30)
    assert rates.headline_rate("pfedme.quadratic_speedup", T=2, R=3, N=5) == \
        pytest.approx(1 / 900)
    assert rates.headline_rate("pfedme.nonconvex", T=2, R=3, N=5) == \
        pytest.approx(30 ** (-2 / 3))
    grid = rates.headline_rate("pfedme.linear_speedup", T=np.array([1, 10]), R=1, N=1)
    np.testing.assert_allclose(grid, [1.0, 0.1])


@pytest.mark.parametrize("name,p", [("pfedme.linear_speedup", -1),
                                    ("pfedme.quadratic_speedup", -2),
                                    ("pfedme.nonconvex", sp.Rational(-2, 3))])
def test_headline_exponents_symbolic_and_numeric(name, p):
    ex = rates.power_exponents(rates.HEADLINE_RATES[name], ["T", "R", "N", "K"])
    assert ex == {"T": p, "R": p, "N": p, "K": 0}
    xs = np.array([10.0, 100.0, 1000.0])
    for var in "TRN":
        kw = {"T": 7.0, "R": 3.0, "N": 5.0, var: xs}
        assert slope(xs, rates.headline_rate(name, **kw)) == pytest.approx(float(p), abs=1e-12)


# --------------------------------------------------------------- power_exponents
@settings(max_examples=25, deadline=None)
@given(a=st.fractions(-3, 3, max_denominator=6), b=st.fractions(-3, 3, max_denominator=6),
       c=st.fractions(-3, 3, max_denominator=6), e=st.fractions(-3, 3, max_denominator=6),
       coef=st.integers(1, 100))
def test_power_exponents_reads_monomials(a, b, c, e, coef):
    ps = [sp.Rational(x.numerator, x.denominator) for x in (a, b, c, e)]
    expr = coef * T ** ps[0] * R ** ps[1] * N ** ps[2] * K ** ps[3]
    out = rates.power_exponents(expr, [T, R, N, K])
    assert out == dict(zip("TRNK", ps))
    assert all(isinstance(v, sp.Rational) for v in out.values())


def test_power_exponents_sums_and_special_cases():
    sig, lam = sp.symbols("sigma lambda", positive=True)
    assert rates.power_exponents(1 / T + 1 / (T * R * N), "TRN") == {"T": -1, "R": 0, "N": 0}
    assert rates.power_exponents((R * sig + lam) ** sp.Rational(1, 3), ["R"]) == \
        {"R": sp.Rational(1, 3)}
    assert rates.power_exponents((T - 1) / T ** 2, ["T"]) == {"T": -1}  # not a positive sum
    assert rates.power_exponents(sp.log(T) / T, ["T"]) == {"T": -1}     # logs count as 0
    assert rates.power_exponents(1 / sp.sqrt(K * N * R * T), ["K"]) == {"K": sp.Rational(-1, 2)}
    assert rates.power_exponents(5, ["T"]) == {"T": 0}
    r = sp.Symbol("r", positive=True)
    assert rates.power_exponents(T ** (-r), ["T"]) == {"T": -r}
    with pytest.raises(ValueError, match="polynomially"):
        rates.power_exponents(sp.exp(-T), ["T"])
    with pytest.raises(ValueError, match="Symbols or names"):
        rates.power_exponents(T, [3])


def test_power_exponents_agree_with_numeric_slope_on_theorem_terms():
    # Theorem 2(a) drift with δ = 0 and Δ_F = σ² = 1: an exact monomial in T, R, N, β
    drift = pfedme.theorem2a_symbolic(sp.Rational(1, 3))["drift"]
    ex = rates.power_exponents(drift, ["T", "R", "beta"])
    assert ex == {"T": sp.Rational(-2, 3), "R": 0, "beta": sp.Rational(-4, 3)}
    xs = np.array([10.0, 100.0, 1000.0])
    kw = dict(T=100, R=8, N=4, beta=2.0, lam=3.0, L=1.0, delta_sq=0.0, sigma_F2_sq=1.0,
              Delta_F=1.0)
    for var in ("T", "R", "beta"):
        ys = [pfedme.theorem2a(**{**kw, var: x})["drift"] for x in xs]
        assert slope(xs, ys) == pytest.approx(float(ex[var]), abs=1e-12)


# ---------------------------------------------------------- corollary derivations
def test_corollary1_readings():
    d = {r: rates.corollary1_derivation(r) for r in rates.COROLLARY1_CHOICES}
    third = {k: int(v) for k, v in d["(i) sqrt(N/T)"].exponents.items()}
    assert third == {"T": -1, "R": 0, "N": -1} and not d["(i) sqrt(N/T)"].follows
    assert dict(d["(i) sqrt(N)/T"].exponents) == {"T": 0, "R": 0, "N": -1}
    assert not d["(i) sqrt(N)/T"].follows
    assert dict(d["(ii) NR"].exponents) == {"T": -2, "R": -2, "N": -2} and d["(ii) NR"].follows
    assert d["(i) variant sqrt(NR/T)"].follows
    assert rates.corollary1_derivation() == d["(i) sqrt(N/T)"]  # default reading


def test_corollary1_numeric_confirms_default_reading():
    # drift term of Theorem 1(a), S = N, β = √(N/T): independent numeric slopes in R and N
    kw = dict(T=100, R=10, N=10_000, lam=15.0, mu=1.0, delta_sq=0.0, sigma_F1_sq=1.0,
              Delta0=1.0, check_conditions=False)
    xs = np.array([10_000.0, 100_000.0, 1_000_000.0])
    ys = [pfedme.theorem1a(**{**kw, "N": x, "beta": math.sqrt(x / 100)})["drift"] for x in xs]
    assert slope(xs, ys) == pytest.approx(-1.0, abs=1e-12)
    rs = np.array([5.0, 50.0, 500.0])
    ys = [pfedme.theorem1a(**{**kw, "R": r, "beta": 10.0})["drift"] for r in rs]
    assert slope(rs, ys) == pytest.approx(0.0, abs=1e-12)  # no speed-up in R


def test_corollary2_readings():
    default = rates.corollary2_derivation()
    assert dict(default.exponents) == {"T": sp.Rational(-2, 3), "R": sp.Rational(-1, 3),
                                       "N": sp.Rational(-2, 3)}
    assert dict(default.coupled) == {"R": sp.Rational(-5, 3), "N": -2}
    assert dict(default.claimed_coupled) == {"R": -2, "N": -2} and not default.follows
    assert rates.corollary2_derivation(sp.Rational(2, 3)).follows
    assert rates.corollary2_derivation(beta_reading="variant N^(1/2) R^(1/2)").follows
    all_d = rates.corollary_derivations()
    assert [x.follows for x in all_d] == [False, False, True, True, False, True, True]


def test_corollary2_numeric_coupled_slope():
    # T = (NR)², β = N^½R^¼, δ = 0: drift ∝ N^-2 R^-5/3 with the printed R^(1/3)
    rs = np.array([10.0, 100.0, 1000.0])
    ys = []
    for r in rs:
        beta, t = pfedme.corollary2_choice(N=10, R=int(r))
        ys.append(pfedme.theorem2a(T=t, R=r, N=10, beta=beta, lam=3.0, L=1.0, delta_sq=0.0,
                                   sigma_F2_sq=1.0, Delta_F=1.0)["drift"])
    assert slope(rs, ys) == pytest.approx(-5 / 3, abs=1e-12)


def test_derivation_validation():
    with pytest.raises(ValueError, match="reading"):
        rates.corollary1_derivation("beta=1")
    with pytest.raises(ValueError, match="beta_reading"):
        rates.corollary2_derivation(beta_reading="N")
    with pytest.raises(ValueError, match="r_exponent"):
        rates.corollary2_derivation(0)
    with pytest.raises(ValueError, match="unknown rate"):
        rates.headline_rate("cgpfl", T=1, R=1, N=1)
    with pytest.raises(ValueError, match="T must be"):
        rates.headline_rate("pfedme.nonconvex", T=0, R=1, N=1)


def test_cgpfl_headline_rate_matches_its_theorem_module_and_reads_minus_half():
    import sympy as sp

    from pfl_theory import cgpfl_symbolic, rates

    expr = rates.HEADLINE_RATES["cgpfl.generalized"]
    assert sp.simplify(expr - cgpfl_symbolic.headline_rate()) == 0
    exps = rates.power_exponents(expr, ["T", "R", "N", "K"])
    assert all(v == sp.Rational(-1, 2) for v in exps.values())
    # numeric form lambdified from the same expression: 1/sqrt(2·3·4·5) by hand
    assert abs(rates.headline_rate("cgpfl.generalized", T=2, R=3, N=4, K=5) - 120 ** -0.5) < 1e-15
