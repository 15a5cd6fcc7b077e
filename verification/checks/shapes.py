"""Shape (scaling) checks of the bounds whose values are VACUOUS (kind ``envelope``).

A statistical bound that is 10³× above the measurement cannot tell a right formula from one
with a missing √ or a dropped N — but its *dependence* on m, n, N or T can be checked: the
papers' claims are about that dependence (PPFE's favourable dependence on n̄ and N, PLGU's
and CGPFL's on m).  Each check here takes the bound's value along a grid spanning ≥ 1.5
decades of one variable, with the constants of the very run (so what varies is the formula's
dependence on the variable), divides the measured quantity by it, and asks that the ratio
stay within :data:`SHAPE_BAND` (fixed before any run) — a two-sided test: the measured
quantity must *follow* the bound's shape, up to one constant.

The measured quantities are those of the value checks: the exact excess risk on the linear
generator (PPFE, verification/checks/bounds_ppfe_linear.py), the held-out generalization gap
of trained PLGU models (verification/checks/bounds_plgu.py), CGPFL's exact population excess
(verification/checks/bounds_cgpfl_generalization.py) and (1/T)Σ‖∇G_K‖² of CGPFL runs.
Every check reports the fitted log-log slopes of the measurement and of the bound, so a
FAILS says *where* the shape is wrong (e.g. "bound ∝ n^−0.5, measured ∝ n^−1.1").
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from verification.checks import bounds_cgpfl, bounds_cgpfl_generalization, bounds_plgu
from verification.checks import bounds_ppfe_linear as lin
from verification.core.registry import Context, Outcome, Verdict, check, envelope_outcome

#: fixed before any run: an exponent error of ½ in the variable moves measured/shape by
#: 10^(1.5/2) = 5.6 over 1.5 decades, a dropped factor N or m by ≥ 31.6; a shape that is right
#: up to its dropped logarithms (log 640 / log 20 = 2.2, under a √: 1.5) and the measurement's
#: noise moves it by less than 3
SHAPE_BAND = 3.0
BAND_REASON = ("measured/bound within a factor 3 over >= 1.5 decades: an exponent error of "
               "1/2 moves it by 5.6, dropped logs and noise by < 3")

_N_GRID = {"quick": [20, 60, 200, 640], "full": [20, 60, 200, 640, 2000, 6400]}


def _slope(x, y) -> float:
    """Least-squares slope of log y on log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def _shape(name: str, grid, measured, bound, *, detail: str = "",
           band: float = SHAPE_BAND) -> Outcome:
    """Envelope of measured against the bound's values over ``grid`` (≥ 1.5 decades), with
    the fitted slopes in the detail; INCONCLUSIVE when a measurement is ≤ 0 (no ratio)."""
    g, m, b = (np.asarray(v, dtype=float) for v in (grid, measured, bound))
    if g.max() / g.min() < 10 ** 1.5 - 1e-9:
        raise ValueError(f"shape grid over {name} spans < 1.5 decades: {g.tolist()}")
    if np.any(m <= 0):
        return Outcome(measured=None, theoretical=band, holds=False,
                       verdict=Verdict.INCONCLUSIVE,
                       detail=f"a measurement is <= 0 on the {name} grid {g.tolist()} "
                              f"({m.tolist()}): no ratio; {detail}",
                       sensitivity=None, sensitivity_note="n/a: no measured/bound ratio")
    sm, sb = _slope(g, m), _slope(g, b)
    where = (f"{name} = {g.tolist()}: measured ∝ {name}^{sm:.2f}, bound ∝ {name}^{sb:.2f}"
             f" (exponent gap {sm - sb:+.2f})")
    out = envelope_outcome(m, b, factor=band, detail=f"{where}; {detail}" if detail else where,
                           extra={name: g.tolist(), "measured": m.tolist(),
                                  "shape": b.tolist(), "slope_measured": sm,
                                  "slope_bound": sb})
    return out


# ----------------------------------------------------------------------------- PPFE
def _ppfe_n(ctx: Context) -> dict:
    p = ctx.params
    return lin._linear_ppfe(ctx.seed, p["dim"], tuple((p["clients"], n) for n in p["sizes"]),
                            p["delta"])


_PPFE_N = dict(quick={"clients": 10, "dim": 3, "sizes": _N_GRID["quick"], "delta": 0.05},
               full={"clients": 50, "dim": 5, "sizes": _N_GRID["full"], "delta": 0.05})


@check("ppfe.shape_theorem7_n", paper=lin.PAPER,
       reference="Theorem 7 (eq. 24, §C.5.3): dependence on the client size n̄", kind="envelope",
       reconstructed=True, tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON, **_PPFE_N)
def theorem7_n(ctx: Context) -> Outcome:
    """Exact excess risk of 2-stage linear PPFE against the shape of Theorem 7's bound
    (``theorem7_terms`` total, the loss range held fixed) over n ∈ ≥ 1.5 decades."""
    r = _ppfe_n(ctx)
    return _shape("n", r["n"], r["excess"], r["calc_raw"],
                  detail=f"N = {ctx.params['clients']}, d = {ctx.params['dim']}")


@check("ppfe.shape_theorem7_union_n", paper=lin.PAPER,
       reference="Theorem 7 via eqs. (26)–(27): dependence of 2 sup|L̂ − L| on n̄",
       kind="envelope", reconstructed=True, tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON,
       **_PPFE_N)
def theorem7_union_n(ctx: Context) -> Outcome:
    """Exact excess risk against the explicit uniform-deviation bound (constants of each run,
    so its loss range moves with n as the observed maxima do) over n ∈ ≥ 1.5 decades."""
    r = _ppfe_n(ctx)
    return _shape("n", r["n"], r["excess"], r["union"],
                  detail=f"N = {ctx.params['clients']}, d = {ctx.params['dim']}; loss range "
                         f"from each run ({min(r['loss_range']):.3g}–"
                         f"{max(r['loss_range']):.3g})")


@check("ppfe.shape_corollary2_N", paper=lin.PAPER,
       reference="Corollary 2 (eqs. 29–30, §C.5.4): dependence on the number of clients N",
       kind="envelope", reconstructed=True, tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON,
       quick={"clients": [4, 13, 40, 128], "dim": 3, "n": 40, "delta": 0.05},
       full={"clients": [4, 13, 40, 128, 400], "dim": 5, "n": 40, "delta": 0.05})
def corollary2_N(ctx: Context) -> Outcome:
    """Exact excess risk against the shape of Corollary 2 (``corollary2_terms`` total) over
    N ∈ ≥ 1.5 decades at fixed n."""
    p = ctx.params
    r = lin._linear_ppfe(ctx.seed, p["dim"], tuple((int(c), p["n"]) for c in p["clients"]),
                         p["delta"])
    return _shape("N", r["N"], r["excess"], r["cor_raw"], detail=f"n = {p['n']}, d = {p['dim']}")


# ----------------------------------------------------------------------------- PLGU
_PLGU_M = dict(quick={"clients": 8, "sizes": [16, 48, 160, 512], "steps": 150},
               full={"clients": 20, "sizes": [16, 48, 160, 512, 1600], "steps": 400})


def _plgu_shape(key: str, gap: str, label: str):
    def run(ctx: Context) -> Outcome:
        p = ctx.params
        r = bounds_plgu._theorems(ctx.seed, p["clients"], tuple(p["sizes"]), p["steps"])
        return _shape("m̂", r["m"], r[gap], r[key],
                      detail=f"{label}; N = {p['clients']}, ρ = 0, M_l from each trained model")
    return run


for _key, _gap, _ref, _label in (
        ("thm1", "gap_lf", "Theorem 1 (PLGU-LF), App. A", "shared layers 1–2, personal layer 3"),
        ("thm2", "gap_lf", "Theorem 2 (PLGU-GRep), App. B", "shared body, personal head"),
        ("thm3", "gap_ghn", "Theorem 3 (PLGU-GHN), App. C.2", "hypernetwork [3, 16, 24]")):
    _fn = _plgu_shape(_key, _gap, _label)
    _fn.__name__ = _fn.__qualname__ = f"plgu_shape_{_key}"
    _fn.__doc__ = (f"Held-out generalization gap of a trained {_label} model against the "
                   f"shape of {_ref} (its value with each run's constants) over m̂ ∈ ≥ 1.5 "
                   f"decades.")
    globals()[_fn.__name__] = check(
        f"plgu.shape_{_key.replace('thm', 'theorem')}_m", paper=bounds_plgu.PAPER,
        reference=f"{_ref}: dependence on the client size m̂", kind="envelope",
        tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON, **_PLGU_M)(_fn)


@check("plgu.shape_term4_linear_B", paper=bounds_plgu.PAPER,
       reference="Lemma 4 / Theorem 1 term 4, homogeneous reading: dependence on the input "
                 "scale B", kind="envelope", tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON,
       **bounds_plgu._RAD)
def term4_linear_B(ctx: Context) -> Outcome:
    """Lower estimate of R̂ of depth-3 ReLU nets against the homogeneous reading of the
    adversarial term (linear in B) over B = 1e-5 … 10 (6 decades)."""
    p, scales, meas = bounds_plgu._rad(ctx)
    bound = [bounds_plgu._term4(p, b, "linear") for b in scales]
    return _shape("B", scales, meas, bound, detail=f"widths {p['widths']}, M_l {p['bounds']}")


# ----------------------------------------------------------------------------- CGPFL
@check("cgpfl.shape_thm42_m", paper=bounds_cgpfl.PAPER,
       reference="Theorem 4.2 / ICLR Theorem 2: dependence on the client size m_i",
       kind="envelope", tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON,
       quick={"clients": 12, "k": 3, "dim": 3, "sizes": [30, 95, 300, 950], "lam": 6.0,
              "confidence": 0.05, "noise": 0.5, "held_out": 2000},
       full={"clients": 40, "k": 4, "dim": 10, "sizes": [30, 100, 300, 1000, 3000],
             "lam": 6.0, "confidence": 0.05, "noise": 0.5, "held_out": 2000})
def thm42_m(ctx: Context) -> Outcome:
    """Exact population excess risk of the CGPFL solution against Theorem 4.2's bound (its
    value with each run's constants) over the per-client size m_i ∈ ≥ 1.5 decades."""
    p = ctx.params
    meas, bound = [], []
    for size in p["sizes"]:
        q = {k: v for k, v in p.items() if k != "sizes"}
        sub = replace(ctx, params={**q, "size": int(size)})
        out = bounds_cgpfl_generalization.thm42_gap(sub)
        meas.append(out.measured)
        bound.append(out.theoretical)
    return _shape("m_i", p["sizes"], meas, bound,
                  detail=f"N = {p['clients']}, K = {p['k']}, d = {p['dim']}, λ = {p['lam']}")


@check("cgpfl.shape_thm41_T", paper=bounds_cgpfl.PAPER,
       reference="Theorem 4.1 / ICLR Theorem 1 before the case analysis: dependence on T",
       kind="envelope", tolerance=SHAPE_BAND, tolerance_reason=BAND_REASON,
       quick={**bounds_cgpfl.THM41_QUICK, "rounds": [8, 16, 32, 64, 128, 256]},
       full={**bounds_cgpfl.THM41_FULL, "rounds": [16, 32, 64, 128, 256, 512]})
def thm41_T(ctx: Context) -> Outcome:
    """(1/T)Σ_t (1/K)‖∇G_K(Ω^t)‖² over prefixes T of one CGPFL run (β fixed, inside the
    theorem's condition) against the stepwise bound 4Δ_G/(α̂T) + C₁α²/(α̂²T) + C₂/T + C₃α̂²/α²
    + 52δ²/(KN) over T ∈ ≥ 1.5 decades, with the whole run's constants (ρ_Ω, ρ_g, Δ_G are
    maxima or differences over the run, valid for every prefix), so that what varies is the
    formula's dependence on T."""
    p = ctx.params
    rounds = [int(t) for t in p["rounds"]]
    q = {**p, "rounds": max(rounds)}
    fed, model, curv, delta_sq, lip_g = bounds_cgpfl._thm41_setup(q, ctx.seed)
    R, k, n = q["local_rounds"], q["k"], q["clients"]
    beta = 1.0 / (math.sqrt(416.0) * R * lip_g)
    rec = bounds_cgpfl._run(bounds_cgpfl._alg(q, curv, beta), fed, model, max(rounds), ctx.seed)
    c = bounds_cgpfl._constants(rec, k)  # the whole run's constants: valid for every prefix
    meas, bound = [], []
    for t in rounds:
        meas.append(float(rec["grad"][:t].mean()))
        bound.append(bounds_cgpfl.th.theorem41_stepwise(
            alpha_hat=R * beta, alpha=1.0, lipschitz_g=lip_g, inexactness=math.sqrt(delta_sq),
            k=k, n_clients=n, local_rounds=R, rounds=t, **c))
    return _shape("T", rounds, meas, bound, detail=f"K = {k}, N = {n}, R = {R}, β = {beta:.3g}")
