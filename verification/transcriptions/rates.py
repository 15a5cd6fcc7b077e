"""pFedMe's corollary rates (and CGPFL's headline rate) derived a second time.

Papers: pFedMe — C. T. Dinh, N. H. Tran, T. D. Nguyen, NeurIPS 2020, Corollaries 1–2;
CGPFL — X. Tang, S. Guo, J. Guo, IJCAI 2022, the rate remark after Theorem 4.1.  Written from
the specification (docs/formulas.md §B.6, §A.7), not from :mod:`pfl_theory.rates`:

* headline rates (constant 1): Corollary 1(i) 1/(TRN), 1(ii) 1/(TRN)², Corollary 2
  1/(TRN)^{2/3}, CGPFL 1/√(KNRT);
* Corollary 1 (S = N): β substituted into Theorem 1(a)'s client-drift term (the only term
  with a polynomial rate: the sampling term vanishes, the initial term decays exponentially,
  the neighbourhood does not depend on T, R, N) of :mod:`verification.transcriptions.pfedme`;
  the readings of (i): β = √(N/T) (default), √N/T (alternative), the variant √(NR/T) that
  would give 1/(TRN); (ii) β = NR;
* Corollary 2 (S = N): β = N^{1/2}R^{1/4} (or the variant N^{1/2}R^{1/2}) in Theorem 2(a)'s
  drift term with R exponent r; then T = (NR)² in initial + drift, compared with the claimed
  (TRN)^{-2/3} under the same coupling;
* the exponent of a variable in a rate is the limit of x ∂log e/∂x as x → ∞ (the others
  fixed), computed here **numerically** at x = 10^600 and 10^1200 in 80-digit arithmetic (two
  terms whose exponents differ by 1/24 are then 10^-25 apart) and rounded to a fraction
  with denominator <= 24 (a different method from pfl_theory's structural reading).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping

import mpmath
import sympy as sp

from verification.transcriptions import pfedme as tx

T, R, N, S, beta = tx.T, tx.R, tx.N, tx.S, tx.beta
K = sp.Symbol("K", positive=True)

HEADLINE = {
    "pfedme.linear_speedup": 1 / (T * R * N),
    "pfedme.quadratic_speedup": 1 / (T * R * N) ** 2,
    "pfedme.nonconvex": 1 / (T * R * N) ** sp.Rational(2, 3),
    "cgpfl.generalized": 1 / sp.sqrt(K * N * R * T),
}
COROLLARY1 = {  # reading -> (β, claimed rate)
    "(i) sqrt(N/T)": (sp.sqrt(N / T), HEADLINE["pfedme.linear_speedup"]),
    "(i) sqrt(N)/T": (sp.sqrt(N) / T, HEADLINE["pfedme.linear_speedup"]),
    "(ii) NR": (N * R, HEADLINE["pfedme.quadratic_speedup"]),
    "(i) variant sqrt(NR/T)": (sp.sqrt(N * R / T), HEADLINE["pfedme.linear_speedup"]),
}
COROLLARY2 = {"N^(1/2) R^(1/4)": sp.sqrt(N) * R ** sp.Rational(1, 4),
              "variant N^(1/2) R^(1/2)": sp.sqrt(N) * sp.sqrt(R)}


def headline(name: str, **values: Any) -> float:
    """A headline rate at T, R, N (and K) in float64."""
    expr = HEADLINE[name]
    return float(expr.subs({s: values[s.name] for s in expr.free_symbols}))


def growth_exponent(expr: sp.Expr, var: sp.Symbol,
                    others: Mapping[sp.Symbol, float] | None = None) -> Fraction:
    """lim_{x→∞} x ∂log(expr)/∂x at x = var, the other symbols at ``others`` (default: the
    value 1 + (index+1)/7 each), numerically; ValueError if it has not settled by 10^1200."""
    x = sp.Dummy("x", positive=True)
    rest = sorted(expr.free_symbols - {var}, key=lambda s: s.name)
    vals = {s: sp.Float((others or {}).get(s, 1 + (i + 1) / 7), 30) for i, s in enumerate(rest)}
    e = expr.subs(var, x).subs(vals)
    fn = sp.lambdify(x, x * sp.diff(sp.log(e), x), "mpmath")
    with mpmath.workdps(80):
        v1, v2 = fn(mpmath.mpf(10) ** 600), fn(mpmath.mpf(10) ** 1200)
        if abs(v1 - v2) > mpmath.mpf(10) ** -20:
            raise ValueError(f"{var} does not enter {expr} as a power (log-derivative "
                             f"{mpmath.nstr(v1, 8)} at 1e600, {mpmath.nstr(v2, 8)} at 1e1200)")
        frac = Fraction(str(mpmath.nstr(v2, 40))).limit_denominator(24)
        if abs(v2 - mpmath.mpf(frac.numerator) / frac.denominator) > mpmath.mpf(10) ** -20:
            raise ValueError(f"exponent of {var} in {expr} is not a simple fraction: {v2}")
    return frac


def exponents(expr: sp.Expr, names: Iterable[str]) -> dict[str, Fraction]:
    """{name: growth exponent} for the named symbols (0 for a symbol absent from expr)."""
    by_name = {s.name: s for s in expr.free_symbols}
    return {n: growth_exponent(expr, by_name[n]) if n in by_name else Fraction(0)
            for n in names}


def _at_most(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> bool:
    return all(a[k] <= b[k] for k in b)


#: derivations already made (they depend on nothing but this module; a plain dict, so the
#: mutation run's clearing of functools caches does not make every mutant redo them)
_DONE: dict[tuple, dict[str, Any]] = {}


def corollary1(reading: str) -> dict[str, Any]:
    """β, rate (the drift term with S = N), its exponents in T, R, N, the claimed ones and
    whether the bound decays at least as fast as claimed."""
    if ("1", reading) not in _DONE:
        _DONE["1", reading] = _corollary1(reading)
    return _DONE["1", reading]


def _corollary1(reading: str) -> dict[str, Any]:
    b, claim = COROLLARY1[reading]
    drift = tx.THEOREM1A["drift"].subs({S: N, beta: b})
    exps, claimed = exponents(drift, "TRN"), exponents(claim, "TRN")
    return {"beta": b, "rate": drift, "exponents": exps, "claimed": claimed,
            "follows": _at_most(exps, claimed), "coupled": None, "claimed_coupled": None}


def corollary2(r: Any, beta_reading: str = "N^(1/2) R^(1/4)") -> dict[str, Any]:
    """Like :func:`corollary1` for Theorem 2(a) with R exponent ``r``; ``follows`` compares
    the exponents in R, N of initial + drift with the claim's after T = (NR)²."""
    key = ("2", sp.nsimplify(r), beta_reading)
    if key not in _DONE:
        _DONE[key] = _corollary2(*key[1:])
    return _DONE[key]


def _corollary2(r: Any, beta_reading: str) -> dict[str, Any]:
    b = COROLLARY2[beta_reading]
    terms = {k: v.subs({tx.r_exponent: sp.nsimplify(r), S: N, beta: b})
             for k, v in tx.THEOREM2A.items()}
    coupling = {T: sp.solve(sp.Eq(T ** sp.Rational(1, 3), (N * R) ** sp.Rational(2, 3)), T)[0]}
    coupled = exponents((terms["initial"] + terms["drift"]).subs(coupling), "RN")
    claimed_coupled = exponents(HEADLINE["pfedme.nonconvex"].subs(coupling), "RN")
    return {"beta": b, "rate": terms["drift"], "exponents": exponents(terms["drift"], "TRN"),
            "claimed": exponents(HEADLINE["pfedme.nonconvex"], "TRN"),
            "follows": _at_most(coupled, claimed_coupled), "coupled": coupled,
            "claimed_coupled": claimed_coupled}
