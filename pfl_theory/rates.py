"""Symbolic convergence rates: headline pFedMe rates, exponent reading, corollary derivations.

Papers: pFedMe — C. T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with
Moreau Envelopes*, NeurIPS 2020 (Corollaries 1–2; docs/formulas.md §B.6).

* :data:`HEADLINE_RATES` — sympy forms of O(1/(TRN)), O(1/(TRN)²), O(1/(TRN)^{2/3}); the
  numeric :func:`headline_rate` is lambdified from them.
* :func:`power_exponents` — reads the exponents of T, R, N, K (any symbols) from a rate.
* :func:`corollary1_derivation` / :func:`corollary2_derivation` — substitute the corollary
  choices of β (every reading of docs/formulas.md §B.6) into the Theorem 1(a) / 2(a) terms of
  :mod:`pfl_theory.pfedme` (the same sympy expressions the numeric bounds are built from)
  and report the resulting exponents and whether the corollary's rate follows.

Findings (constants 1, S = N): Corollary 1(ii) β = NR gives exactly 1/(TRN)²; the printed
(i) β = √(N/T) gives T⁻¹N⁻¹R⁰ (no speed-up in R), β = √N/T gives N⁻¹ only; β = √(NR/T)
would give 1/(TRN). Corollary 2 with β = N^{1/2}R^{1/4} and T = (NR)² follows only if the
third term of Theorem 2(a) has R^{2/3} in the denominator (or β ∝ N^{1/2}R^{1/2}); with the
printed R^{1/3} the bound scales as N⁻²R^{-5/3} instead of (TRN)^{-2/3} = (NR)⁻².
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import sympy as sp

from pfl_theory import pfedme
from pfl_theory.validation import positive
from pfl_theory.validation import guard_public_functions

T, R, N = (pfedme.SYMBOLS[k] for k in ("T", "R", "N"))
K = sp.Symbol("K", positive=True)
RATE_SYMBOLS = {"T": T, "R": R, "N": N, "K": K}

HEADLINE_RATES: Mapping[str, sp.Expr] = {
    "pfedme.linear_speedup": 1 / (T * R * N),            # Corollary 1(i), strongly convex
    "pfedme.quadratic_speedup": 1 / (T * R * N) ** 2,    # Corollary 1(ii), strongly convex
    "pfedme.nonconvex": (T * R * N) ** sp.Rational(-2, 3),  # Corollary 2, non-convex
    # CGPFL Theorem 4.1 remark (IJCAI): O(1/sqrt(KNRT)); see pfl_theory.cgpfl_symbolic
    "cgpfl.generalized": 1 / sp.sqrt(K * N * R * T),
}
_HEADLINE_FN = {k: sp.lambdify((T, R, N, K), e, "numpy") for k, e in HEADLINE_RATES.items()}


def headline_rate(name: str, *, T: Any, R: Any, N: Any, K: Any = 1) -> Any:
    """Numeric value of a headline rate (constant 1), lambdified from
    :data:`HEADLINE_RATES`; broadcasts over numpy arrays (``K`` only enters CGPFL's)."""
    if name not in _HEADLINE_FN:
        raise ValueError(f"unknown rate {name!r}; known: {sorted(_HEADLINE_FN)}")
    vals = [np.asarray(v, dtype=np.float64) for v in (T, R, N, K)]
    for n, v in zip("TRNK", vals):
        if np.any(~np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{n} must be finite and > 0, got {v!r}")
    return _HEADLINE_FN[name](*vals)


# ------------------------------------------------------------------------- exponents
def _symbol(s: Any, expr: sp.Expr) -> sp.Symbol:
    if isinstance(s, sp.Symbol):
        return s
    if not isinstance(s, str):
        raise ValueError(f"symbols must be sympy Symbols or names, got {s!r}")
    for fs in expr.free_symbols:
        if fs.name == s:
            return fs
    return sp.Symbol(s, positive=True)


def _exponent(e: sp.Expr, x: sp.Symbol) -> sp.Expr:
    """Growth exponent of e in x (x → ∞), by structure: products add exponents, a power
    with x-free exponent multiplies, a sum of positive terms takes the largest, a rational
    function gives deg num − deg den; anything else uses the limit of the log-derivative
    (log factors count as exponent 0, as in Õ)."""
    if not e.has(x):
        return sp.Integer(0)
    if e == x:
        return sp.Integer(1)
    if e.is_Mul:
        return sum((_exponent(f, x) for f in e.args), sp.Integer(0))
    if e.is_Pow and not e.exp.has(x) and e.base.is_positive:
        return e.exp * _exponent(e.base, x)
    if e.is_Add and all(t.is_positive for t in e.args):
        return sp.Max(*(_exponent(t, x) for t in e.args))
    num, den = sp.fraction(sp.together(e))
    if num.is_polynomial(x) and den.is_polynomial(x):
        return sp.degree(num, x) - sp.degree(den, x)
    return sp.simplify(sp.limit(x * sp.diff(sp.log(e), x), x, sp.oo))


def power_exponents(expr: Any, symbols: Iterable[Any]) -> dict[str, sp.Expr]:
    """Exponent of each symbol in a rate: p_s = lim_{s→∞} ∂ log(expr)/∂ log s.

    For a monomial c·T^a R^b N^c K^e this reads a, b, c, e exactly. For sums and other
    non-monomials it is the exponent of the **leading term as that variable grows with the
    others held fixed** (e.g. 1/T + 1/(TRN) gives T: −1, R: 0, N: 0; (Rσ² + λ²δ²)^{1/3}
    gives R: 1/3); log factors count as 0 (as in Õ). Computed by structure (products,
    powers, sums of positive terms, rational functions), falling back to the limit.
    ``symbols``: sympy Symbols or names (a name absent from ``expr`` gets 0). Returns
    {name: exponent}, a ``sympy.Rational`` for numeric exponents (a sympy expression if the
    rate carries a symbolic exponent). Raises ``ValueError`` when a variable enters faster
    than any power (e.g. e^{−cT}) or the limit cannot be found."""
    expr = sp.sympify(expr)
    out: dict[str, sp.Expr] = {}
    for s in symbols:
        sym = _symbol(s, expr)
        x = sp.Dummy("x", positive=True)
        p = sp.nsimplify(_exponent(expr.subs(sym, x), x))
        if p.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or isinstance(p, sp.Limit) or p.has(x):
            raise ValueError(f"{sym.name} does not enter {expr} polynomially "
                             f"(log-derivative limit {p})")
        out[sym.name] = p
    return out


# ----------------------------------------------------------------- corollary derivations
@dataclass(frozen=True)
class RateDerivation:
    """Result of substituting a corollary's β (one reading) into a theorem's rate terms.

    ``exponents`` of the rate terms in T, R, N after substitution; ``claimed`` the
    corollary's exponents; for Corollary 2 also the exponents in R, N after the coupling
    T = (NR)² (``coupled``/``claimed_coupled``). ``follows`` is True when every exponent of
    the bound is ≤ the claimed one (the bound decays at least as fast as claimed)."""

    corollary: str
    reading: str
    beta: sp.Expr
    rate: sp.Expr
    exponents: Mapping[str, sp.Expr]
    claimed: Mapping[str, sp.Expr]
    follows: bool
    coupled: Mapping[str, sp.Expr] | None = None
    claimed_coupled: Mapping[str, sp.Expr] | None = None


COROLLARY1_CHOICES = {  # reading name -> (regime, beta expression, claimed rate)
    "(i) sqrt(N/T)": (sp.sqrt(N / T), HEADLINE_RATES["pfedme.linear_speedup"]),
    "(i) sqrt(N)/T": (sp.sqrt(N) / T, HEADLINE_RATES["pfedme.linear_speedup"]),
    "(ii) NR": (N * R, HEADLINE_RATES["pfedme.quadratic_speedup"]),
    "(i) variant sqrt(NR/T)": (sp.sqrt(N * R / T), HEADLINE_RATES["pfedme.linear_speedup"]),
}
COROLLARY2_BETAS = {"N^(1/2) R^(1/4)": sp.sqrt(N) * R ** sp.Rational(1, 4),
                    "variant N^(1/2) R^(1/2)": sp.sqrt(N * R)}


def _le(a: Mapping[str, sp.Expr], b: Mapping[str, sp.Expr]) -> bool:
    return all(bool(sp.simplify(a[k] - b[k]) <= 0) for k in b)


def corollary1_derivation(reading: str = "(i) sqrt(N/T)") -> RateDerivation:
    """Corollary 1 of pFedMe (S = N): substitute β into Theorem 1(a)'s rate term.

    With S = N the sampling term vanishes, the initial term decays exponentially and the
    neighbourhood λ²δ²/μ_F does not depend on T, R, N; the polynomial rate is therefore the
    drift term (Rσ² + δ²λ²)κ_F/(R(Tβμ_F)²). ``reading`` is one of
    :data:`COROLLARY1_CHOICES` (default: the printed (i) read as √(N/T))."""
    if reading not in COROLLARY1_CHOICES:
        raise ValueError(f"reading must be one of {list(COROLLARY1_CHOICES)}, got {reading!r}")
    b, claim = COROLLARY1_CHOICES[reading]
    sym = pfedme.SYMBOLS
    drift = pfedme.theorem1a_symbolic()["drift"].subs({sym["S"]: N, sym["beta"]: b})
    exps = power_exponents(drift, ["T", "R", "N"])
    claimed = power_exponents(claim, ["T", "R", "N"])
    return RateDerivation("pFedMe Corollary 1", reading, b, drift, exps,
                          claimed, _le(exps, claimed))


def corollary2_derivation(r_exponent: Any = sp.Rational(1, 3),
                          beta_reading: str = "N^(1/2) R^(1/4)") -> RateDerivation:
    """Corollary 2 of pFedMe (S = N): β = N^{1/2}R^{1/4}, T^{1/3} = (NR)^{2/3}.

    Substitutes β into Theorem 2(a)'s drift term with the R exponent ``r_exponent``
    (printed layout 1/3, the default), reports its exponents in T, R, N, then substitutes
    T = (NR)² into initial + drift and compares the exponents in R, N with those of the
    claimed (TRN)^{-2/3} under the same coupling (= (NR)⁻²). ``follows`` refers to the
    coupled comparison, the corollary's literal claim."""
    if beta_reading not in COROLLARY2_BETAS:
        raise ValueError(f"beta_reading must be one of {list(COROLLARY2_BETAS)}")
    positive("r_exponent", float(r_exponent))
    b = COROLLARY2_BETAS[beta_reading]
    sym = pfedme.SYMBOLS
    terms = pfedme.theorem2a_symbolic(r_exponent)
    drift = terms["drift"].subs({sym["S"]: N, sym["beta"]: b})
    rate = terms["initial"] + drift
    claim = HEADLINE_RATES["pfedme.nonconvex"]
    coupling = {T: (N * R) ** 2}
    coupled = power_exponents(rate.subs(coupling), ["R", "N"])
    claimed_coupled = power_exponents(claim.subs(coupling), ["R", "N"])
    return RateDerivation(
        "pFedMe Corollary 2", f"r_exponent={sp.nsimplify(r_exponent)}, beta={beta_reading}",
        b, drift, power_exponents(drift, ["T", "R", "N"]),
        power_exponents(claim, ["T", "R", "N"]),
        _le(coupled, claimed_coupled), coupled, claimed_coupled)


def corollary_derivations() -> list[RateDerivation]:
    """Every reading of Corollaries 1 and 2 (for reports and the verification suite)."""
    out = [corollary1_derivation(r) for r in COROLLARY1_CHOICES]
    for r_exp in (sp.Rational(1, 3), sp.Rational(2, 3)):
        out.append(corollary2_derivation(r_exp))
    out.append(corollary2_derivation(sp.Rational(1, 3), "variant N^(1/2) R^(1/2)"))
    return out


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
