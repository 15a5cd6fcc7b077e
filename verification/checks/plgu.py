"""PLGU (Qu et al., CVPR 2023) checks §E.D1–D4, D7, D8: SAM/LWSAM perturbations, personalization
scores, bound calculators and a depth-1 Rademacher sanity check.  All in float64."""

from __future__ import annotations

import math

import numpy as np
import torch

from algorithms.methods.sam.sam import perturbation
from pfl_theory import plgu as P
from verification.estimators.fitting import fit_loglog, rate_verdict
from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import outcome, rate_three_way

PAPER = "PLGU (CVPR 2023)"
F64 = torch.float64
P_GRID = (1.1, 1.5, 2.0, 3.0, 10.0)


def _grads(ctx: Context) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(ctx.seed)
    n, k = ctx.params["clients"], ctx.params["dim"]
    # gradient scales spread over 1e-2..1e2 so ‖g‖ ≠ 1 (the printed form is exact only there)
    scale = 10.0 ** torch.linspace(-2, 2, n, dtype=F64)[:, None]
    return {"w": scale * torch.randn(n, k, generator=g, dtype=F64),
            "b": scale * torch.randn(n, 3, generator=g, dtype=F64)}


def _flat(d: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([d[k] for k in sorted(d)], dim=1)


def _norm_deviation(ctx: Context, exponent: str, ps) -> dict[str, float]:
    g, rho = _grads(ctx), ctx.params["rho"]
    out = {}
    for p in ps:
        eps = _flat(perturbation(g, rho=rho, p=p, exponent=exponent))
        norms = torch.linalg.vector_norm(eps, ord=p, dim=1)
        out[f"p={p:g}"] = float((norms / rho - 1).abs().max())
    return out


@check("plgu.perturbation_norm", paper=PAPER, reference="eq. (5) with exponent 1/p; eq. (3) at p=2",
       kind="identity", tolerance=1e-10,
       tolerance_reason="float64 powers |g|^(q-1) and ℓ_p sums: relative error ~1e-14",
       quick={"clients": 20, "dim": 50, "rho": 0.05}, full={"clients": 200, "dim": 500, "rho": 0.05})
def perturbation_norm(ctx: Context) -> Outcome:
    """‖ε̃‖_p = ρ for the corrected (1/p) exponent, Λ = I, p ∈ (1, ∞]; p = 2 gives ρ g/‖g‖_2."""
    dev = _norm_deviation(ctx, "corrected", P_GRID + (math.inf,))
    g = _grads(ctx)
    gf = _flat(g)
    sam = ctx.params["rho"] * gf / torch.linalg.vector_norm(gf, dim=1, keepdim=True)
    dev["p=2 vs rho*g/|g|"] = float((_flat(perturbation(g, rho=ctx.params["rho"])) - sam).abs().max()
                                    / ctx.params["rho"])
    worst = max(dev.values())
    return Outcome(measured=dev, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=f"max relative deviation of ‖ε̃‖_p from ρ over p ∈ {P_GRID + (math.inf,)}: {worst:.2e}")


@check("plgu.perturbation_norm_printed_exponent", paper=PAPER,
       reference="eq. (5)/(12) as printed (exponent p-1) — ERRATUM? docs/formulas.md §D.2", kind="identity",
       tolerance=1e-10, tolerance_reason="same float64 arithmetic as plgu.perturbation_norm",
       quick={"clients": 20, "dim": 50, "rho": 0.05}, full={"clients": 200, "dim": 500, "rho": 0.05})
def perturbation_norm_printed_exponent(ctx: Context) -> Outcome:
    """Does the printed eq. (5) (denominator (‖g‖_q^q)^{p−1}) satisfy ‖ε̃‖_p = ρ?  At p = 2 it
    gives ρ g/‖g‖², of norm ρ/‖g‖.  ERRATUM when the printed exponent misses ρ and the
    corrected 1/p exponent hits it (same gradients); HOLDS if the printed one were right;
    FAILS if neither reading gives ‖ε̃‖_p = ρ."""
    dev = _norm_deviation(ctx, "printed", P_GRID)
    fixed = max(_norm_deviation(ctx, "corrected", P_GRID).values())
    worst = max(dev.values())
    verdict = (Verdict.HOLDS if worst <= ctx.tolerance else
               Verdict.ERRATUM if fixed <= ctx.tolerance else Verdict.FAILS)
    # measured: the printed formula's output is evaluated and violates ‖ε̃‖_p = ρ (the
    # constraint eq. (3) states); the corrected one's output satisfies it on the same gradients
    return outcome(verdict, measured=dev, theoretical=0.0, erratum_basis="measured",
                   detail=f"printed exponent: max |‖ε̃‖_p/ρ − 1| = {worst:.3g} over p ∈ {P_GRID}, "
                          f"{dev['p=2']:.3g} at p=2 (where ‖ε̃‖ = ρ/‖g‖; gradient norms 1e-2..1e2); "
                          f"corrected 1/p exponent: {fixed:.2g} → {verdict.value}")


@check("plgu.layer_perturbation_norms", paper=PAPER, reference="eq. (5), Λ_i = diag(ξ_i), p = 2",
       kind="identity", tolerance=1e-12,
       tolerance_reason="float64 norms of a few hundred terms: relative error ~1e-15",
       quick={"clients": 20, "dim": 50, "rho": 0.05}, full={"clients": 200, "dim": 500, "rho": 0.05})
def layer_perturbation_norms(ctx: Context) -> Outcome:
    """Per-layer ‖ε̃_l‖_2 = ρ ξ_l ‖g_l‖_2/‖g‖_2, and ξ_l = 0 layers are not perturbed."""
    g, rho = _grads(ctx), ctx.params["rho"]
    gen = torch.Generator().manual_seed(ctx.seed + 1)
    xi = torch.rand(ctx.params["clients"], 2, generator=gen, dtype=F64)
    xi[::3, 1] = 0.0
    eps = perturbation(g, rho=rho, xi=xi, layers=[["b"], ["w"]])
    gnorm = torch.linalg.vector_norm(_flat(g), dim=1)
    err = 0.0
    for l, name in enumerate(("b", "w")):
        want = rho * xi[:, l] * torch.linalg.vector_norm(g[name], dim=1) / gnorm
        got = torch.linalg.vector_norm(eps[name], dim=1)
        err = max(err, float(((got - want).abs() / rho).max()))
    leaked = int(torch.count_nonzero(eps["w"][::3]))
    return Outcome(measured={"max_rel_error": err, "nonzero_in_xi0_layers": leaked},
                   theoretical={"max_rel_error": 0.0, "nonzero_in_xi0_layers": 0},
                   holds=err <= ctx.tolerance and leaked == 0,
                   detail=f"max |‖ε̃_l‖ − ρξ_l‖g_l‖/‖g‖|/ρ = {err:.2e}; nonzero entries in ξ=0 layers: {leaked}")


@check("plgu.first_order_ascent", paper=PAPER, reference="eq. (3)/(5): ε̃ ≈ argmax_{‖ε‖≤ρ} F(θ+ε)",
       kind="rate",
       quick={"clients": 8, "samples": 50, "dim": 10, "rhos": (0.01, 0.03, 0.1, 0.3),
              "ascent_steps": 60, "seeds": 1},
       full={"clients": 30, "samples": 200, "dim": 30, "rhos": (0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
             "ascent_steps": 300, "seeds": 3})
def first_order_ascent(ctx: Context) -> Outcome:
    """SAM's ε̃ = ρ g/‖g‖ (Λ = I) is the first-order solution of max_{‖ε‖≤ρ} F(θ+ε).  On a
    logistic loss the true maximiser ε* is found by projected gradient ascent on the sphere
    (started at ε̃), over ρ spanning 1.5 decades up to ρ = 0.3 where curvature matters.  The
    claim 'first-order accurate' means the relative ascent deficit
    r(ρ) = (F(θ+ε*) − F(θ+ε̃))/(F(θ+ε*) − F(θ)) vanishes at least linearly: fitted slope of
    max-over-clients r in ρ ≥ 1 (the expansion predicts 2).  Three-way verdict on the CI; a
    wrong direction or norm leaves r = O(1) (slope ≈ 0) and FAILS."""
    n, m, k = (ctx.params[x] for x in ("clients", "samples", "dim"))
    rhos = list(ctx.params["rhos"])
    rows = []
    for s in range(ctx.seed, ctx.seed + ctx.params["seeds"]):
        gen = torch.Generator().manual_seed(s)
        x = torch.randn(n, m, k, generator=gen, dtype=F64)
        y = torch.sign(torch.randn(n, m, generator=gen, dtype=F64))

        def loss(th):  # th [n, k] -> per-client mean logistic loss [n]
            return torch.nn.functional.softplus(-y * torch.einsum("nmk,nk->nm", x, th)).mean(-1)

        theta = torch.randn(n, k, generator=gen, dtype=F64)
        th = theta.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss(th).sum(), th)
        f0, row = loss(theta), []
        for rho in rhos:
            sam = loss(theta + perturbation({"t": grad}, rho=rho)["t"]) - f0
            e = rho * grad / torch.linalg.vector_norm(grad, dim=1, keepdim=True)
            for _ in range(ctx.params["ascent_steps"]):
                e = e.clone().requires_grad_(True)
                (ge,) = torch.autograd.grad(loss(theta + e).sum(), e)
                e = e.detach() + rho * ge / torch.linalg.vector_norm(ge, dim=1, keepdim=True)
                e = rho * e / torch.linalg.vector_norm(e, dim=1, keepdim=True)
            best = torch.maximum(loss(theta + e) - f0, sam)  # ε̃ itself is a candidate
            row.append(max(float(((best - sam) / best).max()), 1e-300))
        rows.append(row)
    fit = fit_loglog(rhos, np.asarray(rows), seed=ctx.seed)
    verdict, line = rate_three_way(fit, 1.0, claim="at_least")
    return outcome(verdict, measured={"slope": fit.slope, "ci": list(fit.ci),
                                      "deficit": np.asarray(rows).mean(0).tolist()},
                   theoretical={"slope": ">= 1 (expansion: 2)"},
                   detail=f"relative ascent deficit at ρ={rhos}: "
                          f"{[f'{v:.2g}' for v in np.asarray(rows).mean(0)]}; {line}")


# plgu.score_invariants was removed (issue 13): Σξ = 1 is our own normalisation, so the check
# restated the implementation; the invariants stay as unit tests
# (tests/algorithms/test_plgu_scores.py).


# plgu.bound_monotonicity was removed (issue 13): monotonicity of our own closed forms in ρ,
# N, m̂ is a property of the formulas as typed, not a claim measured against anything; it is
# unit-tested (tests/pfl_theory/test_plgu.py) and the bounds' values are compared with
# measurement in checks/bounds_plgu.py.


@check("plgu.rademacher_linear", paper=PAPER, reference="Lemma 2 at depth 1 (Golowich form B·M/√m)",
       kind="rate", tolerance=0.05,
       tolerance_reason="finite Monte-Carlo draws; slope over a 64x range of m, per-point SE ~1%",
       quick={"ms": [32, 128, 512, 2048], "draws": 500, "seeds": 3, "dim": 3},
       full={"ms": [32, 128, 512, 2048, 8192], "draws": 2000, "seeds": 5, "dim": 3})
def rademacher_linear(ctx: Context) -> Outcome:
    """Monte-Carlo empirical Rademacher complexity of {x ↦ ⟨w,x⟩ : ‖w‖ ≤ M} on ‖x‖ = B samples is
    ≤ B M/√m (within 3 standard errors) and decays with slope −1/2 in m."""
    B, M, ms = 1.5, 2.0, np.asarray(ctx.params["ms"])
    est = np.zeros((ctx.params["seeds"], ms.size))
    ratio = 0.0
    for s in range(ctx.params["seeds"]):
        rng = np.random.default_rng([ctx.seed, s])
        for j, m in enumerate(ms):
            x = rng.normal(size=(int(m), ctx.params["dim"]))
            x *= B / np.linalg.norm(x, axis=1, keepdims=True)
            e, se = P.empirical_rademacher_linear(x, M=M, n_draws=ctx.params["draws"],
                                                  seed=int(rng.integers(2**31)))
            bound = P.linear_rademacher_bound(B=B, M=M, m=m)
            ratio = max(ratio, (e - 3 * se) / bound)  # 3 SE: Monte-Carlo noise allowance
            est[s, j] = e
    fit = fit_loglog(ms, est, seed=ctx.seed)
    verdict = rate_verdict(fit, -0.5, tol=ctx.tolerance)
    holds = bool(verdict) and ratio <= 1.0
    return Outcome(measured={"slope": fit.slope, "ci": list(fit.ci), "max_ratio_to_bound": ratio},
                   theoretical={"slope": -0.5, "max_ratio_to_bound": 1.0}, holds=holds,
                   detail=f"{verdict.detail}; max (estimate − 3SE)/(BM/√m) = {ratio:.3f}")


# plgu.metric_ordering was removed (issue 13): low5 ≤ average ≤ top5 holds for the means of
# any sorted vector; the definitions are unit-tested (tests/algorithms/test_evaluation.py).


