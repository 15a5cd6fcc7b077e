"""PLGU (Qu et al., CVPR 2023) bound calculators against a second, independent writing of the
paper's formulas (:mod:`verification.transcriptions.plgu`, sympy): every public function of
:mod:`pfl_theory.plgu` at a fixed set of random points, docs/formulas.md §D.8, §E.D7–D8.

Points: positive parameters log-uniform, every scalar argument ≠ 1 and distinct from the
others, so that a dropped factor, two swapped arguments, a wrong exponent or log base change
the value; γ in (0, 1) as the functions require.  ``pfl_theory.plgu`` is called through the
module attribute, so a patched function (the mutation run) is the one compared.

The comparison helpers are :mod:`verification.transcriptions.agreement`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pfl_theory import plgu as P
from verification.core.registry import Context, Outcome, check
from verification.transcriptions import plgu as T
from verification.transcriptions.agreement import (TOL, TOL_REASON, identity_outcome,
                                                   log_uniform, relative_difference)

PAPER = "PLGU (CVPR 2023)"
POINTS = {"quick": {"points": 8}, "full": {"points": 64}}
#: the common @check arguments (each check declares its literal id, which ``pflt verify
#: --only`` reads from the source without importing the module)
_IDENTITY = {"paper": PAPER, "kind": "identity", "tolerance": TOL, "tolerance_reason": TOL_REASON,
             "quick": POINTS["quick"], "full": POINTS["full"]}


def _rng(ctx: Context, key: int) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, 26, key])


def _layers(rng: np.random.Generator, lo: int = 2, hi: int = 6) -> dict[str, Any]:
    """Spectral bounds (≠ 1), widths d_0..d_L (≥ 2) and a random personalized subset."""
    L = int(rng.integers(lo, hi + 1))
    bounds = [log_uniform(rng, 0.4, 2.5) for _ in range(L)]
    widths = [int(v) for v in rng.integers(2, 13, size=L + 1)]
    per = sorted(int(i) for i in rng.choice(L, size=int(rng.integers(1, L)), replace=False))
    return {"spectral_bounds": bounds, "widths": widths, "personalized_layers": per}


def _p(rng: np.random.Generator, i: int) -> float:
    """ℓ_p exponent: mostly p > 2 (where max{1, q^{1/2−1/p}} > 1), p = 1.5 at one point."""
    return 1.5 if i == 1 else log_uniform(rng, 2.2, 9.0)


def _compare(ctx: Context, key: int, draw, ours, theirs, what: str) -> Outcome:
    rng = _rng(ctx, key)
    errs = []
    for i in range(ctx.params["points"]):
        kw = draw(rng, i)
        errs.append(relative_difference(ours(**kw), theirs(**kw)))
    return identity_outcome(errs, ctx.tolerance, what)


# ----------------------------------------------------------------------------- checks
@check("plgu.transcription_clipped_log_lp_factor", **_IDENTITY,
       reference="§E.D7 log max(x, 2); Lemma 3 max{1, q^{1/2−1/p}}")
def clipped_log_lp_factor(ctx: Context) -> Outcome:
    """clipped_log(x) = log max(x, 2) on x ∈ [0.5, 40] (both sides of the clip) and
    lp_factor(p) = max{1, q^{1/2−1/p}} on p ∈ {1, 1.5, 2, ∞} and p log-uniform in [2.2, 9]."""
    rng = _rng(ctx, 1)
    xs = [0.5, 1.5, 2.0] + [log_uniform(rng, 2.5, 40.0) for _ in range(ctx.params["points"])]
    ps = [1.0, 1.5, 2.0, math.inf] + [log_uniform(rng, 2.2, 9.0)
                                      for _ in range(ctx.params["points"])]
    errs = [relative_difference(P.clipped_log(v), T.clipped_log(v)) for v in xs]
    errs += [relative_difference(P.lp_factor(v), T.lp_factor(v)) for v in ps]
    return identity_outcome(errs, ctx.tolerance, "log max(x, 2) and max{1, q^{1/2−1/p}}")


@check("plgu.transcription_lemma2", **_IDENTITY,
       reference="Lemma 2 (App. A): 2B√(d+1+log n) Π M_l / √m")
def lemma2(ctx: Context) -> Outcome:
    """Lemma 2's margin complexity equals its independent transcription at random points."""
    def draw(rng, i):
        return {"B": log_uniform(rng, 1.2, 6.0), "spectral_bounds": _layers(rng)["spectral_bounds"],
                "m": log_uniform(rng, 50.0, 5e4), "d": log_uniform(rng, 3.0, 40.0),
                "n": log_uniform(rng, 2.0, 30.0)}
    return _compare(ctx, 2, draw, lambda **k: P.lemma2_margin_complexity(**k),
                    T.lemma2_margin_complexity, "Lemma 2")


@check("plgu.transcription_lemma3", **_IDENTITY,
       reference="Lemma 3 (App. A): 24 max{1,q^{1/2−1/p}} (B+ρ)/(γ√m) "
                 "√(Σ d_l d_{l−1} log 3L) Π M_l")
def lemma3(ctx: Context) -> Outcome:
    """Lemma 3's adversarial complexity equals its independent transcription (p > 2 mostly,
    where max{1, q^{1/2−1/p}} > 1)."""
    def draw(rng, i):
        lay = _layers(rng)
        return {"B": log_uniform(rng, 1.2, 6.0), "rho": log_uniform(rng, 0.01, 0.5),
                "spectral_bounds": lay["spectral_bounds"], "widths": lay["widths"],
                "m": log_uniform(rng, 50.0, 5e4), "gamma": log_uniform(rng, 0.01, 0.6),
                "p": _p(rng, i)}
    return _compare(ctx, 3, draw, lambda **k: P.lemma3_adversarial_complexity(**k),
                    T.lemma3_adversarial_complexity, "Lemma 3")


def _lemma4_args(rng, i):
    lay = _layers(rng, 2, 7)
    if i == 0:  # D = L: the adversarial term vanishes through D(L − D)
        lay["personalized_layers"] = list(range(len(lay["spectral_bounds"])))
    return {"B": log_uniform(rng, 1.2, 6.0), "rho": log_uniform(rng, 0.01, 0.5), **lay,
            "m_hat": log_uniform(rng, 10.0, 500.0), "gamma": log_uniform(rng, 0.01, 0.6),
            "d": log_uniform(rng, 3.0, 40.0), "n": log_uniform(rng, 2.0, 30.0), "p": _p(rng, i)}


@check("plgu.transcription_lemma4", **_IDENTITY,
       reference="Lemma 4 (App. A), explicit display (‖x‖ on L^Uni, ‖x‖+ρ on L^Per)")
def lemma4(ctx: Context) -> Outcome:
    """Lemma 4 (both terms and their sum) equals its independent transcription, including a
    point with D = L (adversarial term 0)."""
    return _compare(ctx, 4, _lemma4_args, lambda **k: P.lemma4_personalized_complexity(**k),
                    T.lemma4_personalized_complexity, "Lemma 4 (margin, adversarial, total)")


def _theorem1_args(rng, i):
    lay = _layers(rng, 2, 7)
    m_hat, N = log_uniform(rng, 10.0, 500.0), log_uniform(rng, 3.0, 200.0)
    return {"beta": log_uniform(rng, 1.2, 4.0), "B": log_uniform(rng, 1.2, 6.0),
            "rho": log_uniform(rng, 0.01, 0.5), "spectral_bounds": lay["spectral_bounds"],
            "d": log_uniform(rng, 3.0, 40.0), "personalized_layers": lay["personalized_layers"],
            "m": N * m_hat * log_uniform(rng, 1.5, 4.0), "N": N, "m_hat": m_hat,
            "gamma": log_uniform(rng, 0.01, 0.6)}


@check("plgu.transcription_theorem1", **_IDENTITY,
       reference="Theorem 1 (PLGU-LF), App. A; last term 2√(log(1/γ)/m)")
def theorem1(ctx: Context) -> Outcome:
    """Theorem 1's five terms and total equal their independent transcription."""
    return _compare(ctx, 5, _theorem1_args, lambda **k: P.theorem1_plgu_lf(**k),
                    T.theorem1_plgu_lf, "Theorem 1 (four terms, concentration, total)")


@check("plgu.transcription_theorem2", **_IDENTITY,
       reference="Theorem 2 (PLGU-GRep), App. B (Lemmas 5–7)")
def theorem2(ctx: Context) -> Outcome:
    """Theorem 2's terms and total equal their independent transcription."""
    def draw(rng, i):
        return {"beta": log_uniform(rng, 1.2, 4.0), "beta_h": log_uniform(rng, 0.2, 0.8),
                "beta_phi": log_uniform(rng, 4.5, 9.0), "B": log_uniform(rng, 1.2, 4.0),
                "rho": log_uniform(rng, 0.01, 0.5), "M_h": log_uniform(rng, 1.5, 8.0),
                "spectral_bounds": _layers(rng, 2, 7)["spectral_bounds"],
                "d": log_uniform(rng, 10.0, 60.0), "N": log_uniform(rng, 3.0, 200.0),
                "m_hat": log_uniform(rng, 10.0, 500.0), "gamma": log_uniform(rng, 0.01, 0.6)}
    return _compare(ctx, 6, draw, lambda **k: P.theorem2_plgu_grep(**k),
                    T.theorem2_plgu_grep, "Theorem 2 (head, representation, total)")


@check("plgu.transcription_theorem3", **_IDENTITY,
       reference="Theorem 3 (PLGU-GHN), App. C.2, as printed (β on the descriptor term); "
                 "docs/formulas.md §D.8")
def theorem3(ctx: Context) -> Outcome:
    """Theorem 3's terms and total equal their independent transcription."""
    def draw(rng, i):
        return {"beta": log_uniform(rng, 1.2, 4.0), "beta_v": log_uniform(rng, 0.2, 0.8),
                "beta_h": log_uniform(rng, 4.5, 9.0), "B": log_uniform(rng, 1.2, 4.0),
                "R": log_uniform(rng, 5.0, 12.0), "rho": log_uniform(rng, 0.01, 0.5),
                "spectral_bounds": _layers(rng, 2, 7)["spectral_bounds"],
                "hn_spectral_bounds": _layers(rng, 2, 5)["spectral_bounds"],
                "d_h": log_uniform(rng, 15.0, 60.0), "N": log_uniform(rng, 3.0, 200.0),
                "m_hat": log_uniform(rng, 10.0, 500.0), "gamma": log_uniform(rng, 0.01, 0.6)}
    return _compare(ctx, 7, draw, lambda **k: P.theorem3_plgu_ghn(**k),
                    T.theorem3_plgu_ghn, "Theorem 3 (descriptor, hypernetwork, total)")


@check("plgu.transcription_linear_rademacher_bound", **_IDENTITY,
       reference="Lemma 2 at depth 1 (§E.D8): B M / √m")
def linear_rademacher_bound(ctx: Context) -> Outcome:
    """The depth-1 bound B M / √m equals its independent transcription."""
    def draw(rng, i):
        return {"B": log_uniform(rng, 1.2, 6.0), "M": log_uniform(rng, 0.1, 0.8),
                "m": log_uniform(rng, 10.0, 1e4)}
    return _compare(ctx, 8, draw, lambda **k: P.linear_rademacher_bound(**k),
                    T.linear_rademacher_bound, "B M / √m")


@check("plgu.transcription_empirical_rademacher", paper=PAPER,
       reference="§E.D8: R̂_S = (M/m) E_ε ‖Σ_j ε_j x_j‖ (exact over all 2^m sign vectors)",
       kind="identity", tolerance=0.02,
       tolerance_reason="Monte-Carlo mean of 40,000 sign draws vs the exact mean over all 2^12 "
                        "sign vectors: its standard error is ≤ 0.3% here, so 2% is ≥ 6 standard "
                        "errors; the returned standard error vs the exact σ/√draws agrees to "
                        "≲ 1% (sampling error of a standard deviation from 40,000 draws)",
       quick={"samples": 12, "dim": 3, "draws": 40_000},
       full={"samples": 14, "dim": 5, "draws": 200_000})
def empirical_rademacher(ctx: Context) -> Outcome:
    """empirical_rademacher_linear (Monte-Carlo) against the exact expectation by enumeration
    (an independent brute force): both the estimate and its standard error."""
    rng, p = _rng(ctx, 9), ctx.params
    x = rng.normal(size=(p["samples"], p["dim"])) * log_uniform(rng, 1.5, 3.0)
    M = log_uniform(rng, 2.5, 4.0)
    est, se = P.empirical_rademacher_linear(x, M=M, n_draws=p["draws"], seed=ctx.seed + 7)
    mean, std = T.exact_rademacher_linear(x, M)
    errs = {"estimate": abs(est - mean) / mean,
            "standard_error": abs(se - std / math.sqrt(p["draws"])) / (std / math.sqrt(p["draws"]))}
    worst = max(errs.values())
    worst = worst if math.isfinite(worst) else math.inf
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=f"Monte-Carlo {est:.5g} ± {se:.2g} vs exact {mean:.5g} "
                          f"(σ/√draws {std / math.sqrt(p['draws']):.2g}); relative differences "
                          f"{', '.join(f'{k} {v:.2e}' for k, v in errs.items())}")
