"""Rates (pFedMe Corollaries 1–2, CGPFL's headline rate): :mod:`pfl_theory.rates` against
the independent derivation of :mod:`verification.transcriptions.rates`.

The headline rates are compared as numbers at random (T, R, N, K); the corollary derivations
field by field: β and the rate term as numbers at random points, the exponents in T, R, N
(and after Corollary 2's coupling T = (NR)²) exactly, and the verdict ``follows``.  The
exponent reader :func:`pfl_theory.rates.power_exponents` is compared on random monomials and
sums of monomials with rational exponents.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp

from pfl_theory import rates
from verification.core.registry import Context, Outcome, check
from verification.transcriptions import rates as tx
from verification.transcriptions.pfedme import THEOREM1_NAMES, THEOREM2_NAMES
from verification.transcriptions.agreement import Agreement, log_uniform

PAPER = "pFedMe (NeurIPS 2020)"
TOL = 1e-12
TOL_REASON = ("float64 (or exact) evaluation of the same expression written twice: round-off "
              "~1e-15 relative; exponents compared exactly")
PFEDME_RATES = ("pfedme.linear_speedup", "pfedme.quadratic_speedup", "pfedme.nonconvex")


def headline_agreement(ctx: Context, names) -> Agreement:
    """rates.headline_rate against the transcription for ``names``, scalar and vector."""
    agree = Agreement()
    rng = np.random.default_rng(ctx.seed)
    vals = {s: [log_uniform(rng, 2.0, 1e4) for _ in range(ctx.params["points"])] for s in "TRNK"}
    for i in range(ctx.params["points"]):
        v = {s: vals[s][i] for s in "TRNK"}
        for name in names:
            agree.add(name, rates.headline_rate(name, **v), tx.headline(name, **v))
    for name in names:
        agree.add(f"{name}[vector]", rates.headline_rate(name, **vals),
                  [tx.headline(name, **{s: vals[s][i] for s in "TRNK"})
                   for i in range(ctx.params["points"])])
    return agree


@check("pfedme.transcription_headline_rates", paper=PAPER,
       reference="Corollary 1 (i), (ii): 1/(TRN), 1/(TRN)²; Corollary 2: 1/(TRN)^{2/3}",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON,
       quick={"points": 24}, full={"points": 200})
def transcription_headline_rates(ctx: Context) -> Outcome:
    """headline_rate for the three pFedMe rates at random T, R, N (K passed and unused)."""
    return headline_agreement(ctx, PFEDME_RATES).outcome(
        ctx.tolerance, ctx.params["points"], ["headline_rate"])


def _fraction(value) -> Fraction:
    return Fraction(str(sp.nsimplify(value)))


def _compare_derivation(agree: Agreement, label: str, theirs, mine: dict, names: dict,
                        values: list[dict[str, float]]) -> None:
    """Field by field: β and the rate term as numbers (their symbols renamed by ``names``
    to the transcription's), the exponent dicts exactly, ``follows``."""
    for field in ("beta", "rate"):
        e_theirs, e_mine = sp.sympify(getattr(theirs, field)), sp.sympify(mine[field])
        for v in values:
            a = float(e_theirs.subs({s: v[names[s.name]] for s in e_theirs.free_symbols}))
            b = float(e_mine.subs({s: v[s.name] for s in e_mine.free_symbols}))
            agree.add(f"{label}.{field}", a, b)
    for field in ("exponents", "claimed", "coupled", "claimed_coupled"):
        a, b = getattr(theirs, field), mine[field]
        same = (a is None and b is None) or (
            a is not None and b is not None
            and {k: _fraction(x) for k, x in a.items()} == dict(b))
        agree.add_equal(f"{label}.{field}", same, True)
    agree.add_equal(f"{label}.follows", bool(theirs.follows), mine["follows"])


def _values(rng: np.random.Generator, n: int) -> list[dict[str, float]]:
    keys = set(THEOREM1_NAMES.values()) | set(THEOREM2_NAMES.values())
    return [{k: log_uniform(rng, 0.3, 30.0) for k in keys} for _ in range(n)]


def _reading_of(label: str) -> tuple[sp.Rational, str]:
    """'r_exponent=1/3, beta=N^(1/2) R^(1/4)' → (1/3, 'N^(1/2) R^(1/4)')."""
    r, b = label.split(", beta=")
    return sp.Rational(r.removeprefix("r_exponent=")), b


@check("pfedme.transcription_corollary_rates", paper=PAPER,
       reference="Corollary 1 (every reading of (i), (ii)); Corollary 2 (R exponent 1/3, 2/3; "
                 "β = N^{1/2}R^{1/4} and the variant N^{1/2}R^{1/2})",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON,
       quick={"points": 4}, full={"points": 20})
def transcription_corollary_rates(ctx: Context) -> Outcome:
    """corollary1_derivation, corollary2_derivation, corollary_derivations: β, the rate term,
    every exponent and ``follows`` against an independent substitution into the transcribed
    theorems, exponents read numerically."""
    agree = Agreement()
    values = _values(np.random.default_rng(ctx.seed), ctx.params["points"])
    for reading in tx.COROLLARY1:
        _compare_derivation(agree, f"corollary1_derivation[{reading}]",
                            rates.corollary1_derivation(reading), tx.corollary1(reading),
                            THEOREM1_NAMES, values)
    for r in (sp.Rational(1, 3), sp.Rational(2, 3)):
        for b in tx.COROLLARY2:
            _compare_derivation(agree, f"corollary2_derivation[r={r}, {b}]",
                                rates.corollary2_derivation(r, b), tx.corollary2(r, b),
                                THEOREM2_NAMES, values)
    covered = set()
    for d in rates.corollary_derivations():
        first = d.corollary.endswith("1")
        reading = d.reading if first else _reading_of(d.reading)
        covered.add(reading)
        _compare_derivation(agree, f"corollary_derivations[{d.reading}]", d,
                            tx.corollary1(reading) if first else tx.corollary2(*reading),
                            THEOREM1_NAMES if first else THEOREM2_NAMES, values[:1])
    # every reading of Corollary 1 and the printed β of Corollary 2 with r = 1/3 and 2/3
    needed = set(tx.COROLLARY1) | {(sp.Rational(1, 3), "N^(1/2) R^(1/4)"),
                                   (sp.Rational(2, 3), "N^(1/2) R^(1/4)")}
    agree.add_equal("corollary_derivations.readings covered", needed <= covered, True)
    return agree.outcome(ctx.tolerance, ctx.params["points"],
                         ["corollary1_derivation", "corollary2_derivation",
                          "corollary_derivations"])


@check("pfedme.transcription_power_exponents", paper=PAPER,
       reference="exponent of a rate in T, R, N, K: lim x ∂log e/∂x (Corollaries 1–2)",
       kind="identity", tolerance=0.0,
       tolerance_reason="exponents are exact rationals: equal or not",
       quick={"points": 4}, full={"points": 20})
def transcription_power_exponents(ctx: Context) -> Outcome:
    """power_exponents on random c·T^a R^b N^c K^e, sums of two such monomials and
    (R σ + c)^{1/3}/(T^a N^b) against the numerically read exponents."""
    agree = Agreement()
    rng = np.random.default_rng(ctx.seed)
    T, R, N, K = tx.T, tx.R, tx.N, tx.K
    sig, c = sp.symbols("sigma c", positive=True)

    def monomial():
        ex = [sp.Rational(int(rng.integers(-12, 13)), int(rng.choice([1, 2, 3, 4, 6])))
              for _ in range(4)]
        return sp.Rational(int(rng.integers(1, 9)), 7) * T ** ex[0] * R ** ex[1] \
            * N ** ex[2] * K ** ex[3]

    for i in range(ctx.params["points"]):
        m1, m2 = monomial(), monomial()
        other = (R * sig + c) ** sp.Rational(1, 3) / (T ** sp.Rational(int(rng.integers(1, 7)), 3)
                                                     * N ** sp.Rational(1, 2))
        for j, expr in enumerate((m1, m1 + m2, other)):
            got = rates.power_exponents(expr, ["T", "R", "N", "K"])
            want = tx.exponents(expr, ["T", "R", "N", "K"])
            agree.add_equal(f"power_exponents[{['monomial', 'sum', 'root'][j]}]",
                            {k: _fraction(v) for k, v in got.items()} == want, True)
    return agree.outcome(ctx.tolerance, ctx.params["points"], ["power_exponents"])


@check("cgpfl.transcription_headline_rate", paper="CGPFL (IJCAI 2022)",
       reference="Theorem 4.1 rate remark: O(1/√(KNRT))", kind="identity", tolerance=TOL,
       tolerance_reason=TOL_REASON, quick={"points": 24}, full={"points": 200})
def transcription_headline_rate(ctx: Context) -> Outcome:
    """rates.headline_rate("cgpfl.generalized") at random K, N, R, T against 1/√(KNRT)."""
    return headline_agreement(ctx, ["cgpfl.generalized"]).outcome(
        ctx.tolerance, ctx.params["points"], ["headline_rate"])
