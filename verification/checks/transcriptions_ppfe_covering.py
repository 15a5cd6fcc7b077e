"""PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244) covering numbers and concentration
against a second, independent writing of the reconstructed lemmas (:mod:`verification.
transcriptions.ppfe_covering`, sympy): every public function of :mod:`pfl_theory.ppfe_covering`
at a fixed set of random points, docs/formulas.md §C.1, §C.5.6–C.5.9.

The two optimisations (Lemma 6's ε-allocation, eq. 27's radius) are checked by what they
claim: the returned value is the bracket evaluated at the returned argument (by the
transcription), the argument is feasible, and the value is no worse than a reference point
(Lemma 6: the equal split) or our own minimisation (eq. 27).  ``pfl_theory.ppfe_covering`` is
called through the module attribute, so a patched function (the mutation run) is the one
compared.
"""

from __future__ import annotations

import math

import numpy as np

from pfl_theory import ppfe_covering as P
from verification.core.registry import Context, Outcome, check
from verification.transcriptions import ppfe_covering as T
from verification.transcriptions.agreement import (TOL, TOL_REASON, identity_outcome,
                                                   log_uniform, relative_difference)

PAPER = "PPFE (arXiv 2602.14244)"
#: the common @check arguments (literal ids stay readable by ``pflt verify --only``)
_IDENTITY = {"paper": PAPER, "kind": "identity", "reconstructed": True, "tolerance": TOL,
             "tolerance_reason": TOL_REASON, "quick": {"points": 8}, "full": {"points": 64}}


def _rng(ctx: Context, key: int) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, 26, 200 + key])


def _widths(rng: np.random.Generator) -> list[int]:
    depth = int(rng.integers(2, 7))
    return [int(v) for v in rng.integers(2, 25, size=depth)] + [int(rng.integers(1, 4))]


def _network(rng: np.random.Generator) -> dict:
    return {"weight_bound": log_uniform(rng, 0.05, 0.9), "input_bound": log_uniform(rng, 1.5, 4.0),
            "act_lipschitz": log_uniform(rng, 1.2, 3.0), "act_at_zero": log_uniform(rng, 0.01, 0.5)}


def _sizes(rng: np.random.Generator) -> list[int]:
    return [int(v) for v in rng.integers(5, 400, size=int(rng.integers(2, 30)))]


def _log_cover(rng: np.random.Generator):
    """A smooth log-covering function ε ↦ P log(1 + c/ε) (the form of Lemma 4 without the
    ceiling), P and c random."""
    count, scale = float(rng.integers(5, 500)), log_uniform(rng, 0.5, 5.0)
    return lambda radius: count * math.log1p(scale / radius)


@check("ppfe.transcription_lemma4", **_IDENTITY,
       reference="Lemma 4, §C.5.6: A_l, Λ and log N ≤ P log(1 + ⌈MΛ/ε⌉), P = Σ d_l(d_{l−1}+1)")
def lemma4(ctx: Context) -> Outcome:
    """The parameter count, log A_0..log A_{L−1}, log Λ and the log-covering bound of random
    fully connected nets equal the transcription's (exact rational recursion, logs at the end)."""
    rng, errs = _rng(ctx, 1), []
    for _ in range(ctx.params["points"]):
        widths, net, eps = _widths(rng), _network(rng), log_uniform(rng, 1e-4, 0.5)
        errs.append(relative_difference(
            {"P": P.fc_parameter_count(widths), "constants": P.lemma4_log_constants(widths, **net),
             "log_covering": P.lemma4_log_covering(widths, eps=eps, **net)},
            {"P": T.fc_parameter_count(widths), "constants": T.lemma4_log_constants(widths, **net),
             "log_covering": T.lemma4_log_covering(widths, eps=eps, **net)},
            floor=1.0))  # logs: log A_l ≈ 0 when A_l ≈ 1 (relative_difference)
    return identity_outcome(errs, ctx.tolerance, "Lemma 4 (P, log A_l, log Λ, log N)")


@check("ppfe.transcription_lemma5", **_IDENTITY,
       reference="Lemma 5, §C.5.7: N(G∘F, ε_g + L_g ε_f) ≤ N(G, ε_g) N(F, ε_f)")
def lemma5(ctx: Context) -> Outcome:
    """The composed cover's radius and log-size equal the transcription's."""
    rng, errs = _rng(ctx, 2), []
    for _ in range(ctx.params["points"]):
        logs = (log_uniform(rng, 2.0, 500.0), log_uniform(rng, 2.0, 500.0))
        kw = {"eps_g": log_uniform(rng, 1e-3, 0.5), "eps_f": log_uniform(rng, 1e-3, 0.5),
              "lipschitz_g": log_uniform(rng, 1.5, 10.0)}
        errs.append(relative_difference(P.lemma5_composition(*logs, **kw),
                                        T.lemma5_composition(*logs, **kw)))
    return identity_outcome(errs, ctx.tolerance, "Lemma 5")


@check("ppfe.transcription_lemma6", **_IDENTITY,
       reference="Lemma 6, eq. (22), §C.5.8: radius A Σε_t + T B_h ε_α, log-size "
                 "Σ log N_t + T log(⌈A/ε_α⌉ + 1), the α-grid")
def lemma6(ctx: Context) -> Outcome:
    """Radius and log-size of the product cover equal the transcription's; the α-grid has
    ⌈A/ε_α⌉ + 1 points in [−A, A] and covers [−A, A] at radius ε_α (its relative violation)."""
    rng, errs = _rng(ctx, 3), []
    for _ in range(ctx.params["points"]):
        stages = int(rng.integers(2, 6))
        eps = [log_uniform(rng, 1e-3, 0.3) for _ in range(stages)]
        logs = [log_uniform(rng, 2.0, 500.0) for _ in range(stages)]
        A, B_h = log_uniform(rng, 1.5, 10.0), log_uniform(rng, 1.5, 10.0)
        e_a = log_uniform(rng, 0.01, 0.4)
        errs.append(relative_difference(
            (P.lemma6_cover_radius(eps, e_a, coef_bound=A, output_bound=B_h),
             P.lemma6_log_cover_size(logs, e_a, coef_bound=A)),
            (T.lemma6_cover_radius(eps, e_a, coef_bound=A, output_bound=B_h),
             T.lemma6_log_cover_size(logs, e_a, coef_bound=A))))
        grid = np.sort(np.asarray(P.alpha_grid(A, e_a), dtype=float))
        if grid.size != T.alpha_grid_size(A, e_a):
            errs.append(math.inf)
            continue
        reach = max(grid[0] + A, A - grid[-1], float(np.max(np.diff(grid), initial=0.0)) / 2)
        errs += [max(reach - e_a, 0.0) / e_a, max(float(np.abs(grid).max()) - A, 0.0) / A]
    return identity_outcome(errs, ctx.tolerance, "Lemma 6's radius, log-size and α-grid")


@check("ppfe.transcription_lemma6_allocation", **_IDENTITY,
       reference="Lemma 6, eq. (22), §C.5.8: the infimum over feasible allocations")
def lemma6_allocation(ctx: Context) -> Outcome:
    """The allocation Lemma 6's calculator returns is feasible (A Σε_t + T B_h ε_α ≤ ε), its
    value is the transcription's bracket at that allocation, and it is no worse than the
    equal split (relative excess of each)."""
    rng, errs = _rng(ctx, 4), []
    for _ in range(ctx.params["points"]):
        fns = [_log_cover(rng) for _ in range(int(rng.integers(1, 4)))]
        eps = log_uniform(rng, 1e-3, 0.5)
        A, B_h = log_uniform(rng, 1.5, 6.0), log_uniform(rng, 1.5, 6.0)
        got = P.lemma6_log_covering(fns, eps=eps, coef_bound=A, output_bound=B_h)
        value = T.lemma6_objective(fns, got.eps_stages, got.eps_alpha, coef_bound=A)
        radius = T.lemma6_cover_radius(got.eps_stages, got.eps_alpha, coef_bound=A,
                                       output_bound=B_h)
        k = len(fns) + 1  # equal split: each of the T + 1 parts gets ε/(T + 1)
        equal = T.lemma6_objective(fns, [eps / k / A] * len(fns), eps / k / (len(fns) * B_h),
                                   coef_bound=A)
        errs += [relative_difference(got.log_covering, value), max(radius - eps, 0.0) / eps,
                 max(got.log_covering - equal, 0.0) / equal]
    return identity_outcome(errs, ctx.tolerance, "Lemma 6's allocation")


@check("ppfe.transcription_lemma8", **_IDENTITY,
       reference="Lemma 8, §C.5.9: B √(log(2/δ)/(2 N n̄)), 1/n̄ = (1/N) Σ 1/n_i")
def lemma8(ctx: Context) -> Outcome:
    """The harmonic-mean size and Lemma 8's deviation equal the transcription's."""
    rng, errs = _rng(ctx, 5), []
    for _ in range(ctx.params["points"]):
        sizes, kw = _sizes(rng), {"loss_bound": log_uniform(rng, 1.5, 5.0),
                                  "delta": log_uniform(rng, 0.005, 0.3)}
        errs.append(relative_difference(
            (P.harmonic_mean_size(sizes), P.lemma8_deviation(sizes, **kw)),
            (T.harmonic_mean_size(sizes), T.lemma8_deviation(sizes, **kw))))
    return identity_outcome(errs, ctx.tolerance, "n̄ and Lemma 8")


@check("ppfe.transcription_union_bound", **{
    **_IDENTITY, "tolerance": 1e-10,
    "tolerance_reason": "two numerical minimisations of a smooth function of log ε (bounded "
                        "Brent): at a minimum the value is second-order in the argument's "
                        "error, measured ≤ 4e-13 relative over 256 points; the value at the "
                        "returned radius is the same closed form (round-off 1e-15); 1e-10 "
                        "leaves ≥ 250×"},
       reference="eqs. (26)–(27), §C.5.9: inf_ε 2L_ℓ ε + B √((log N(ε) + log(2/δ))/(2N n̄))")
def union_bound(ctx: Context) -> Outcome:
    """The bound the union-bound calculator returns equals the transcription's bracket at the
    returned radius and our own minimum over ε (grid + Brent)."""
    rng, errs = _rng(ctx, 6), []
    for _ in range(ctx.params["points"]):
        fn, sizes = _log_cover(rng), _sizes(rng)
        kw = {"loss_lipschitz": log_uniform(rng, 1.5, 5.0),
              "loss_bound": log_uniform(rng, 6.0, 20.0),
              "delta": log_uniform(rng, 0.005, 0.3)}
        bound, radius = P.union_bound_deviation(fn, sizes=sizes, **kw)
        best, _ = T.union_bound_minimum(fn, sizes=sizes, **kw)
        errs += [relative_difference(bound, T.union_bound_at(fn, radius, sizes=sizes, **kw)),
                 relative_difference(bound, best)]
    return identity_outcome(errs, ctx.tolerance, "eq. (27)'s minimum")
