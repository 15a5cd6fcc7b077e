"""CGPFL Theorem 4.1 at a fixed assignment analysed: what ``pflt worst-case --algorithm
cgpfl`` prints and the CGPFL worst-case figure plots.

The exact worst case of (1/T)Σ_t(1/K)‖∇G_K(Ω^t)‖² over L-smooth (or μ-strongly convex)
clients at Δ_G ≤ Δ (:mod:`verification.worst_case.cgpfl`), the theorem's step-wise bound at
Q^t = I and δ = 0 (4Δ_G/(α̂T), :func:`pfl_theory.cgpfl.theorem41_stepwise`), the engine on a
quadratic instance, whether β satisfies the theorem's conditions, the exact constant
worst·α̂T/Δ_G (the theorem has 4), and the largest step β (bisection on the factor β/β_max)
at which the bound is still certified over the whole class (a solve that fails, or whose
primal and dual values differ, counts as not certified: near the edge of stability the
SDPs lose strict feasibility), next to the theorem's β_max.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any, Callable

from pfl_theory import cgpfl as th
from verification.worst_case import cgpfl as W

#: proximal steps per client (T·(R + 1) + 2) of an exact PEP allowed here, measured with 2
#: non-convex clients on the 2-core CPU: T = 3, R = 5 (20 steps) 4.6 s; T = 4, R = 4 (22)
#: 6.1 s; K = 2 contexts (4 clients), T = 4, R = 2 (14) 8.9 s
MAX_CALLS = 24
MAX_CLIENTS = 4


def validate(s: W.CGPFLSetting) -> None:
    calls = s.rounds * (s.local_rounds + 1) + 2
    if calls > MAX_CALLS:
        raise ValueError(f"rounds × (local rounds + 1) + 2 = {calls} proximal steps per client:"
                         f" more than {MAX_CALLS}, too large for an exact PEP")
    if s.contexts * s.per_context > MAX_CLIENTS:
        raise ValueError(f"{s.contexts * s.per_context} modelled clients (contexts × clients per "
                         f"context): more than {MAX_CLIENTS} (contexts are independent: one "
                         f"context with the federation's N gives the same worst case)")


def bound(s: W.CGPFLSetting) -> float:
    """Theorem 4.1's step-wise bound at Q^t = I, δ = 0 (ICLR appendix A.3)."""
    return th.theorem41_stepwise(alpha_hat=s.alpha_hat, alpha=s.alpha, rho_omega=None,
                                 rho_g=None, lipschitz_g=s.L_G, inexactness=0.0,
                                 k=s.contexts, n_clients=s.N, local_rounds=s.local_rounds,
                                 rounds=s.rounds, delta_gap=s.Delta, fixed_assignment=True)


def printed_reading(s: W.CGPFLSetting, *, solver: str = "clarabel") -> dict[str, Any]:
    """Theorem 4.1 with G as printed: G = (1/K)Σ_k G_k = (1/N)Σ_j‖θ_j − ω_{k(j)}‖² makes
    G_k = (K/N)Σ_{j∈C_k}‖θ_j − ω_k‖² and ∇G_k = (2K/N)Σ_{j∈C_k}(ω_k − θ̂_j), which is
    m = K|C_k| times the proof's H_IP; so G_k, L_G and Δ_G are m times larger, the largest β
    m times smaller, and the metric m² times larger. With Δ_G = Δ in the printed units,
    worst = m·worst_proof(Δ) at β = β_max/m (the class's scaling makes the worst case linear
    in Δ), against 4Δ/(α̂T) with α̂ = Rα·β_max/m: their ratio is about m/4, so the step-wise
    inequality fails over the class as soon as K|C_k| > 4."""
    m = s.contexts * s.per_context if s.n_total is None else s.n_total
    t = replace(s, beta=s.beta_max / m)
    solved = W.worst_case(t, solver=solver)
    worst = m * solved.value
    b = 4.0 * s.Delta / (t.alpha_hat * t.rounds)
    return {"factor": m, "beta": t.step, "alpha_hat": t.alpha_hat, "worst_case": worst,
            "bound": b, "ratio": worst / b, "status": solved.status,
            "proof_reading_worst_case": solved.value,
            "proof_reading_bound": bound(t)}


def holds_at(s: W.CGPFLSetting, factor: float, *, solver: str = "clarabel") -> bool:
    """Whether the bound is certified over the class at β = factor·β_max: a solve whose
    primal and dual agree (:func:`~verification.worst_case.cgpfl.reliable`) below the bound
    (an unbounded, failed or unreliable solve counts as not certified)."""
    t = replace(s, beta=factor * s.beta_max)
    try:
        solved = W.worst_case(t, solver=solver)
        return W.reliable(solved) and solved.value <= bound(t) * (1 + 2e-2)
    except Exception:   # unbounded (ArithmeticError) or both solvers failed
        return False


#: the largest β/β_max the bisection tries
SEARCH_TOP = 64.0


def largest_valid_factor(s: W.CGPFLSetting, *, hi: float = SEARCH_TOP, iters: int = 6,
                         solver: str = "clarabel",
                         report: Callable[[float, bool], None] | None = None) -> float:
    """The largest β/β_max (geometric bisection on [1, hi], ``iters`` PEPs) at which the
    worst case stays below the bound; 1 if it fails already at β_max.  ``report(factor,
    certified)`` is called after every solve (the CLI's progress lines)."""
    def test(f: float) -> bool:
        ok = holds_at(s, f, solver=solver)
        if report is not None:
            report(f, ok)
        return ok

    lo = 1.0
    if not test(lo):
        return 1.0
    if test(hi):
        return hi
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if test(mid) else (lo, mid)
    return lo


def analyse(s: W.CGPFLSetting, *, steps: bool = True, solver: str = "clarabel",
            seed: int = 0, report: Callable[[float, bool], None] | None = None
            ) -> dict[str, Any]:
    """Everything of the module docstring for ``s`` as a JSON-ready dict."""
    validate(s)
    solved = W.worst_case(s, solver=solver)
    b = bound(s)
    out: dict[str, Any] = {
        "setting": {**asdict(s), "N": s.N, "beta_used": s.step, "alpha_hat": s.alpha_hat,
                    "L_G": s.L_G},
        "metric": "grad_G_sq_avg", "solver": solver,
        "theorem": "CGPFL Theorem 4.1, step-wise form at Q = I, δ = 0: 4Δ_G/(α̂T)",
        "worst_case": solved.value, "status": solved.status, "seconds": solved.seconds,
        "gram_size": solved.gram_size, "measured": W.measured(s, seed=seed), "bound": b,
        "looseness": b / solved.value if solved.value > 0 else math.inf,
        "exact_constant": solved.value * s.alpha_hat * s.rounds / s.Delta,
        "hypotheses": {"β ≤ β_max (stated and proof's)": s.step <= s.beta_max * (1 + 1e-12),
                       "α ≤ 1": s.alpha <= 1, "λ ≥ 2L (L_F = λ)": s.mu is not None
                       or s.lam >= 2 * s.L}}
    out["printed"] = printed_reading(s, solver=solver)
    if steps:
        out["beta_max"] = s.beta_max
        out["largest_valid_factor"] = largest_valid_factor(s, solver=solver, report=report)
    return out


def render(res: dict[str, Any]) -> str:
    s = res["setting"]
    cls = "L-smooth non-convex" if s["mu"] is None else f"S({s['mu']}, {s['L']})"
    k = s["contexts"] if s["n_total"] is None else s["n_total"] // s["per_context"]
    lines = [f"cgpfl, fixed assignment, exact prox: K = {k}, |C_k| = "
             f"{s['per_context']}, N = {s['N']}, T = {s['rounds']}, R = {s['local_rounds']}, "
             f"λ = {s['lam']:g}, α = {s['alpha']:g}, β = {s['beta_used']:.4g}, α̂ = "
             f"{s['alpha_hat']:.4g}, clients {cls}, Δ_G ≤ {s['Delta']:g}",
             f"metric: (1/T)Σ_t (1/K)‖∇G_K(Ω^t)‖²  ({res['theorem']})",
             f"  measured (engine, quadratic instance) {res['measured']:.6g}",
             f"  worst case (exact PEP, {res['solver']} {res['status']}, Gram "
             f"{res['gram_size']}, {res['seconds']:.2f} s) {res['worst_case']:.6g}",
             f"  paper bound {res['bound']:.6g}   bound/worst {res['looseness']:.4g}; exact "
             f"constant worst·α̂T/Δ_G = {res['exact_constant']:.4g} (the theorem: 4)",
             "  hypotheses: " + ", ".join(f"{k}: {'yes' if v else 'NO'}"
                                          for k, v in res["hypotheses"].items())]
    ratio = res["worst_case"] / res["bound"]
    lines.append("  " + ("worst case ABOVE the bound: a counterexample" if ratio > 1.02 else
                         f"worst case below the bound: the bound holds, {1 / ratio:.4g}× loose"))
    pr = res["printed"]
    lines.append(f"as printed (G = (1/N)Σ‖θ_j − ω_k(j)‖², ∇G_k = (2K/N)Σ_C_k, {pr['factor']}× the "
                 f"proof's; β = β_max/{pr['factor']} = {pr['beta']:.4g}): worst case "
                 f"{pr['worst_case']:.6g} vs bound {pr['bound']:.6g} — "
                 + ("ABOVE: the printed normalisation breaks the step-wise inequality"
                    if pr["ratio"] > 1.02 else f"below ({1 / pr['ratio']:.3g}× loose)"))
    if "largest_valid_factor" in res:
        f = res["largest_valid_factor"]
        where = (f"≥ {f:.3g} (the top of the search)" if f >= SEARCH_TOP else
                 "1 (not certified above it)" if f <= 1.0 else f"≈ {f:.3g}")
        lines.append(f"largest β at which the bound is certified over the class: {where} × the "
                     f"theorem's β_max = {res['beta_max']:.4g} (bisection)")
    return "\n".join(lines)
