"""pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020) Theorem 2 (non-convex) against measurements.

Same design as :mod:`verification.checks.bounds_pfedme` (``envelope``, constants from the
problem that ran, step sizes inside the theorem's conditions) on the non-convex
:class:`verification.experiments.bound_runs.CosineClients`.  Reading (docs/formulas.md §B.6): the
third term's exponent of R is 1/3 (printed); R = 1 here, so the reading does not matter.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import pfedme
from pfl_theory.constants import diversity_sup
from pfl_theory.threads import single_threaded
from verification.estimators import federation as est
from verification.experiments import pfedme_quadratic as ex
from verification.experiments.bound_runs import (ENVELOPE_FACTOR, FACTOR_REASON, CosineClients,
                                     doubling_grid, envelope_grads, envelope_with_mutation,
                                     inner_residual, trajectory)
from verification.core.registry import Context, Outcome, check

PAPER = "pFedMe (NeurIPS 2020)"
F64 = torch.float64


@check("pfedme.bound_thm2_nonconvex", paper=PAPER,
       reference="Theorem 2(a) (non-convex), docs/formulas.md §B.6", kind="envelope",
       tolerance=ENVELOPE_FACTOR, tolerance_reason=FACTOR_REASON,
       quick={"clients": 5, "dim": 2, "a": 1 / 16, "omega": 2.0, "inner_steps": 2,
              "batch": 5, "reps": 1, "points": 6},
       full={"clients": 10, "dim": 2, "a": 1 / 16, "omega": 2.0, "inner_steps": 2,
             "batch": 5, "reps": 8, "points": 6})
@single_threaded
def thm2_nonconvex(ctx: Context) -> Outcome:
    """E‖∇F(w_{t*})‖² (t* uniform on 0..T−1, ∇F exact by prox) of the engine's pFedMe on
    non-convex cosine clients, λ = √(8L²+1) (the theorem's smallest λ, L exact), R = 1,
    β = 1, η = η̂₂ = 1/(75λ³), against Theorem 2(a) over T = 75λ²·2^j (T in units of
    1/(η̂₂L_F)).  σ_f² is the max diversity over a 16×16 grid of one period of the (periodic)
    losses, γ_f² the max per-sample variance there, ν the engine's worst inner residual,
    F* the min of F over that grid and the run (an upper estimate, so Δ_F is a lower one)."""
    p = ctx.params
    n, d = p["clients"], p["dim"]
    fed = ex.quadratic_federation(num_clients=n, dim=d, noise=0.3, samples=40, seed=ctx.seed)
    model = CosineClients(d, a=p["a"], omega=p["omega"])
    x, y = est.client_data(fed)
    L = model.smoothness(x)
    lam = math.sqrt(8 * L ** 2 + 1)
    eta = pfedme.local_step_bound(eta_hat=pfedme.eta_hat_2(lam=lam, L=L), beta=1.0, R=1)
    grid = doubling_grid(math.ceil(75 * lam ** 2), p["points"])
    period = 2 * math.pi / p["omega"]
    axis = torch.linspace(0, period, 17, dtype=F64)[:-1]
    torus = torch.cartesian_prod(*[axis] * d)
    g_pts, _ = model.grad({"theta": torus[:, None, :].expand(-1, n, -1).reshape(-1, d)},
                          x[None].expand(len(torus), -1, -1, -1).reshape(-1, *x.shape[1:]), None)
    sigma_f_sq = diversity_sup(g_pts["theta"].reshape(len(torus), n, d).numpy())
    pts = [{"theta": t[None]} for t in torus[:: max(1, len(torus) // 16)]]
    gamma_sq = est.gamma_f_sq(model, x, y, pts)
    alg = PFedMe(lam=lam, lr=eta, personal_lr=1.0 / (lam + L), inner_steps=p["inner_steps"],
                 local_rounds=1, batch_size=p["batch"], beta=1.0, clients_per_round=n)
    w0 = {"theta": period * torch.rand(1, d, generator=torch.Generator().manual_seed(ctx.seed),
                                       dtype=F64)}
    measured = np.zeros(len(grid))
    f_vals = []
    for rep in range(p["reps"]):
        ws = torch.cat([w["theta"] for w in trajectory(alg, fed, model, w0, int(grid[-1]),
                                                        ctx.seed * 1000 + rep)])
        gF, fv = envelope_grads(model, x, ws, lam, L)
        sq = (gF ** 2).sum(1).numpy()
        measured += np.array([sq[:T].mean() for T in grid]) / p["reps"]
        peak = (float(sq[0]), float(sq.max()), int(sq.argmax()))
        f_vals.append(fv)
    nu = inner_residual(model, fed, alg, pts[:4] + [{"theta": ws[int(t)][None]} for t in grid],
                         ctx.seed + 17)
    delta_sq = pfedme.lemma1_delta_sq(lam=lam, gamma_f_sq=gamma_sq, batch_size=p["batch"],
                                      nu=nu, L=L)
    _, f_torus = envelope_grads(model, x, torus, lam, L)
    f_star = min(float(f_torus.min()), min(float(v.min()) for v in f_vals))
    delta_f = float(f_vals[0][0]) - f_star
    sigma2 = pfedme.sigma_F2_sq(lam=lam, L=L, sigma_f_sq=sigma_f_sq)
    bound = pfedme.theorem2a(T=grid, R=1, N=n, beta=1.0, lam=lam, L=L, delta_sq=delta_sq,
                             sigma_F2_sq=sigma2, Delta_F=delta_f)
    shape = np.asarray(bound.total, dtype=float)
    trivial = 2 * lam * delta_f  # ‖∇F(w)‖² ≤ 2L_F(F(w) − F*) while F stays below F(w0)
    return envelope_with_mutation(
        measured, shape, p, grid=grid, name="T",
        detail=(f"T = {grid.tolist()}; L = {L:.4g} (exact), lam = sqrt(8L^2+1) = {lam:.4g}, "
                f"eta = eta_hat_2 = {eta:.3g}, sigma_f^2 = {sigma_f_sq:.3g}, sigma_F2^2 = "
                f"{sigma2:.3g}, gamma_f^2 = {gamma_sq:.3g}, nu = {nu:.2g}, delta^2 = "
                f"{delta_sq:.3g}, Delta_F = {delta_f:.3g}; ||grad F(w_0)||^2 = {peak[0]:.3g}, "
                f"max_t ||grad F(w_t)||^2 = {peak[1]:.3g} at t = {peak[2]} (a rise means the run "
                f"starts on a plateau near a saddle); shape (C = 1) above 2 L_F Delta_F = "
                f"{trivial:.3g} at {int((shape >= trivial).sum())}/{len(grid)} grid points"),
        extra={"T": grid.tolist(), "measured": measured.tolist(), "shape": shape.tolist(),
               "terms": {k: np.asarray(v, dtype=float).tolist() for k, v in bound.terms.items()},
               "constants": {"L": L, "lam": lam, "eta": eta, "sigma_f_sq": sigma_f_sq,
                             "sigma_F2_sq": sigma2, "gamma_f_sq": gamma_sq, "nu": nu,
                             "delta_sq": delta_sq, "Delta_F": delta_f}})
