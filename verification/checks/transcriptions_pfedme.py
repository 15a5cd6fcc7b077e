"""pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020): every formula of :mod:`pfl_theory.pfedme`
against its independent sympy transcription (:mod:`verification.transcriptions.pfedme`).

Each check draws a fixed set of random points (seed ``ctx.seed``), evaluates the pfl_theory
function **through its module attribute** (so a patched function is the one called) and the
transcription, and HOLDS iff the largest relative difference is <= the tolerance.  The
points satisfy the functions' hypotheses (β ≥ 1, λ ≥ √(8L²+1) > 2√2L > L, S < N, Theorem 1's
T ≥ 2/(η̂₁μ_F)); the theorem bounds are called with ``check_conditions=False`` so that a
mutated argument is evaluated rather than rejected.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from pfl_theory import pfedme
from verification.core.registry import Context, Outcome, check
from verification.transcriptions import pfedme as tx
from verification.transcriptions.pfedme import THEOREM1_NAMES, THEOREM2_NAMES
from verification.transcriptions.agreement import Agreement, int_between, log_uniform

PAPER = "pFedMe (NeurIPS 2020)"
TOL = 1e-12
TOL_REASON = ("float64 evaluation of the same closed form written twice (<= ~20 operations, "
              "one exp/sqrt/cube root): round-off ~1e-15 relative; the points keep every "
              "difference (λ−L, λ²−8L², N/S−1) away from cancellation")
QUICK, FULL = {"points": 24}, {"points": 200}


def draw_point(rng: np.random.Generator) -> dict[str, float]:
    """One point of every pFedMe symbol, inside every hypothesis of §B.5–§B.6."""
    p: dict[str, float] = {}
    p["mu"], p["L"] = log_uniform(rng, 0.05, 5.0), log_uniform(rng, 0.05, 5.0)
    p["lam"] = math.sqrt(8 * p["L"] ** 2 + 1) * log_uniform(rng, 1.1, 10.0)
    p["beta"] = log_uniform(rng, 1.05, 20.0)
    p["R"] = int_between(rng, 2, 40)
    p["N"] = int_between(rng, 8, 500)
    p["S"] = int_between(rng, 2, p["N"] // 2)
    p["batch_size"] = int_between(rng, 2, 256)
    for name, lo, hi in (("gamma_f_sq", 1e-2, 10.0), ("nu", 1e-4, 0.1),
                         ("delta_sq", 1e-3, 1.0), ("sigma_F1_sq", 1e-2, 10.0),
                         ("sigma_F2_sq", 1e-2, 10.0), ("sigma_f_sq", 1e-2, 10.0),
                         ("Delta0", 0.1, 100.0), ("Delta_F", 0.1, 100.0), ("F_gap", 1e-3, 10.0),
                         ("grad_F_norm_sq", 1e-3, 10.0), ("grad_norm_sq", 1e-3, 10.0),
                         ("eta_hat", 1e-5, 0.1), ("r_exponent", 0.2, 0.9)):
        p[name] = log_uniform(rng, lo, hi)
    t_min = float(tx.evaluate("min_rounds_theorem1", **p))
    p["T1"] = int(math.ceil(t_min * log_uniform(rng, 1.05, 4.0)))  # Theorem 1's horizon
    p["T"] = int_between(rng, 10, 100_000)                          # Theorem 2's horizon
    return p


def points(ctx: Context) -> list[dict[str, float]]:
    rng = np.random.default_rng(ctx.seed)
    return [draw_point(rng) for _ in range(ctx.params["points"])]


def _keys(p: dict[str, float], *names: str) -> dict[str, float]:
    return {n: p[n] for n in names}


@check("pfedme.transcription_lemma1", paper=PAPER, reference="Lemma 1 (δ², A1(a) and A1(b))",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_lemma1(ctx: Context) -> Outcome:
    """pfedme.lemma1_delta_sq, both cases, = 2/(λ±·)²(γ_f²/|D| + ν)."""
    agree = Agreement()
    for p in points(ctx):
        common = _keys(p, "lam", "gamma_f_sq", "batch_size", "nu")
        agree.add("lemma1_delta_sq(mu)", pfedme.lemma1_delta_sq(**common, mu=p["mu"]),
                  tx.evaluate("lemma1_delta_sq.mu", **p))
        agree.add("lemma1_delta_sq(L)", pfedme.lemma1_delta_sq(**common, L=p["L"]),
                  tx.evaluate("lemma1_delta_sq.L", **p))
    return agree.outcome(ctx.tolerance, ctx.params["points"], ["lemma1_delta_sq"])


@check("pfedme.transcription_lemma2", paper=PAPER,
       reference="Lemma 2(a), 2(b); σ²_{F,1}, σ²_{F,2}, A3 diversity", kind="identity",
       tolerance=TOL, tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_lemma2(ctx: Context) -> Outcome:
    """lemma2a_bound, sigma_F2_sq, lemma2b_bound against the sympy forms; sigma_F1_sq and
    gradient_diversity against a loop over random gradient rows [N, d]."""
    agree = Agreement()
    rng = np.random.default_rng(ctx.seed + 1)
    for p in points(ctx):
        agree.add("lemma2a_bound", pfedme.lemma2a_bound(**_keys(p, "lam", "F_gap",
                                                                 "sigma_F1_sq")),
                  tx.evaluate("lemma2a_bound", **p))
        agree.add("sigma_F2_sq", pfedme.sigma_F2_sq(**_keys(p, "lam", "L", "sigma_f_sq")),
                  tx.evaluate("sigma_F2_sq", **p))
        agree.add("lemma2b_bound", pfedme.lemma2b_bound(
            **_keys(p, "lam", "L", "grad_F_norm_sq", "sigma_f_sq")),
            tx.evaluate("lemma2b_bound", **p))
        grads = rng.normal(loc=rng.normal(size=3), scale=log_uniform(rng, 0.1, 10.0),
                           size=(int(rng.integers(2, 12)), 3))
        agree.add("sigma_F1_sq", pfedme.sigma_F1_sq(grads), tx.mean_squared_norm(grads))
        agree.add("gradient_diversity", pfedme.gradient_diversity(grads), tx.diversity(grads))
    return agree.outcome(ctx.tolerance, ctx.params["points"],
                         ["lemma2a_bound", "sigma_F2_sq", "lemma2b_bound", "sigma_F1_sq",
                          "gradient_diversity"])


@check("pfedme.transcription_step_sizes", paper=PAPER,
       reference="Theorems 1–2: η̂₁, η̂₂, η ≤ η̂/(βR), T ≥ 2/(η̂₁μ_F)", kind="identity",
       tolerance=TOL, tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_step_sizes(ctx: Context) -> Outcome:
    """eta_hat_1, eta_hat_2, local_step_bound, min_rounds_theorem1."""
    agree = Agreement()
    for p in points(ctx):
        agree.add("eta_hat_1", pfedme.eta_hat_1(**_keys(p, "lam", "mu", "beta")),
                  tx.evaluate("eta_hat_1", **p))
        agree.add("eta_hat_2", pfedme.eta_hat_2(**_keys(p, "lam", "L")),
                  tx.evaluate("eta_hat_2", **p))
        agree.add("local_step_bound", pfedme.local_step_bound(**_keys(p, "eta_hat", "beta",
                                                                       "R")),
                  tx.evaluate("local_step_bound", **p))
        agree.add("min_rounds_theorem1", pfedme.min_rounds_theorem1(**_keys(p, "lam", "mu",
                                                                             "beta")),
                  tx.evaluate("min_rounds_theorem1", **p))
    return agree.outcome(ctx.tolerance, ctx.params["points"],
                         ["eta_hat_1", "eta_hat_2", "local_step_bound", "min_rounds_theorem1"])


def _symbolic(agree: Agreement, label: str, terms: dict, names: dict[str, str], theorem: str,
              pts: list[dict[str, float]], fixed: dict[str, float] | None = None) -> None:
    """Each sympy term of pfl_theory (its symbols renamed by ``names``) evaluated at the
    points against the transcription's term."""
    for term, expr in terms.items():
        syms = sorted(expr.free_symbols, key=lambda s: s.name)
        fn = sp.lambdify(syms, expr, "numpy")
        for p in pts:
            q = {**p, **(fixed or {})}
            theirs = fn(*(q[names[s.name]] for s in syms))
            agree.add(f"{label}[{term}]", float(theirs),
                      tx.evaluate(f"{theorem}.{term}", **q))





@check("pfedme.transcription_theorem1", paper=PAPER, reference="Theorem 1(a), 1(b)",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_theorem1(ctx: Context) -> Outcome:
    """theorem1a (every term and the total), theorem1b and theorem1a_symbolic."""
    agree = Agreement()
    pts = points(ctx)
    for p in pts:
        q = {**p, "T": p["T1"]}
        a = pfedme.theorem1a(**_keys(q, "T", "R", "N", "beta", "lam", "mu", "delta_sq",
                                     "sigma_F1_sq", "Delta0", "S"), check_conditions=False)
        for term in (*tx.THEOREM1A, "total"):
            ours = a.total if term == "total" else a.terms[term]
            agree.add(f"theorem1a[{term}]", ours, tx.evaluate(f"theorem1a.{term}", **q))
        b = pfedme.theorem1b(**_keys(p, "F_gap", "sigma_F1_sq", "lam", "delta_sq"))
        for term in (*tx.THEOREM1B, "total"):
            ours = b.total if term == "total" else b.terms[term]
            agree.add(f"theorem1b[{term}]", ours, tx.evaluate(f"theorem1b.{term}", **p))
    _symbolic(agree, "theorem1a_symbolic", pfedme.theorem1a_symbolic(), THEOREM1_NAMES,
              "theorem1a", [{**p, "T": p["T1"]} for p in pts])
    return agree.outcome(ctx.tolerance, len(pts),
                         ["theorem1a", "theorem1b", "theorem1a_symbolic"])


@check("pfedme.transcription_theorem2", paper=PAPER,
       reference="Theorem 2(a) (R exponent r), 2(b)", kind="identity", tolerance=TOL,
       tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_theorem2(ctx: Context) -> Outcome:
    """theorem2a (every term and the total, random r) and theorem2b; theorem2a_symbolic with
    the symbol r_exp and with r = 1/3."""
    agree = Agreement()
    pts = points(ctx)
    for p in pts:
        a = pfedme.theorem2a(**_keys(p, "T", "R", "N", "beta", "lam", "L", "delta_sq",
                                     "sigma_F2_sq", "Delta_F", "S", "r_exponent"),
                             check_conditions=False)
        for term in (*tx.THEOREM2A, "total"):
            ours = a.total if term == "total" else a.terms[term]
            agree.add(f"theorem2a[{term}]", ours, tx.evaluate(f"theorem2a.{term}", **p))
        b = pfedme.theorem2b(**_keys(p, "grad_norm_sq", "sigma_F2_sq", "lam", "delta_sq"))
        for term in (*tx.THEOREM2B, "total"):
            ours = b.total if term == "total" else b.terms[term]
            agree.add(f"theorem2b[{term}]", ours, tx.evaluate(f"theorem2b.{term}", **p))
    _symbolic(agree, "theorem2a_symbolic(r)", pfedme.theorem2a_symbolic(), THEOREM2_NAMES,
              "theorem2a", pts)
    _symbolic(agree, "theorem2a_symbolic(1/3)", pfedme.theorem2a_symbolic(sp.Rational(1, 3)),
              THEOREM2_NAMES, "theorem2a", pts, fixed={"r_exponent": 1 / 3})
    return agree.outcome(ctx.tolerance, len(pts),
                         ["theorem2a", "theorem2b", "theorem2a_symbolic"])


@check("pfedme.transcription_corollaries", paper=PAPER,
       reference="Corollary 1 (both readings of (i)), Corollary 2", kind="identity",
       tolerance=TOL, tolerance_reason=TOL_REASON, quick=QUICK, full=FULL)
def transcription_corollaries(ctx: Context) -> Outcome:
    """corollary1_beta (β and regime, both readings, both regimes), corollary1_beta_symbolic,
    corollary2_choice (β and T)."""
    agree = Agreement()
    rng = np.random.default_rng(ctx.seed + 2)
    for p in points(ctx):
        n, r = p["N"], p["R"]
        for reading, t in (("sqrt(N/T)", int_between(rng, 2, 2000)),
                           ("sqrt(N)/T", int_between(rng, 2, 40))):
            beta, regime = pfedme.corollary1_beta(N=n, T=t, R=r, reading=reading)
            agree.add(f"corollary1_beta[{reading}]", beta,
                      tx.evaluate(f"corollary1_beta.{reading}", N=n, T=t, R=r))
            agree.add_equal(f"corollary1_beta[{reading}] regime", regime,
                            tx.corollary1_regime(reading, N=n, T=t))
            for reg in ("i", "ii"):
                theirs = pfedme.corollary1_beta_symbolic(reg, reading).subs(
                    {pfedme.SYMBOLS["N"]: n, pfedme.SYMBOLS["T"]: t, pfedme.SYMBOLS["R"]: r})
                branch = tx.COROLLARY1_BETA[reading].args[0 if reg == "i" else 1].expr
                agree.add(f"corollary1_beta_symbolic[{reg}, {reading}]", float(theirs),
                          float(branch.subs({tx.N: n, tx.T: t, tx.R: r})))
        beta2, t2 = pfedme.corollary2_choice(N=n, R=r)
        agree.add("corollary2_choice[beta]", beta2, tx.evaluate("corollary2_choice.beta", **p))
        agree.add("corollary2_choice[T]", t2, tx.evaluate("corollary2_choice.T", **p))
    return agree.outcome(ctx.tolerance, ctx.params["points"],
                         ["corollary1_beta", "corollary1_beta_symbolic", "corollary2_choice"])
