"""pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020) Theorem 1 against measurements on engine runs.

The paper states Theorems 1 and 2 in O(·)/Õ(·) with no constants (the appendix with the
proof constants is not in our copy).  The engine
(:class:`algorithms.methods.regularized.pfedme.PFedMe`, float64) runs with step sizes *inside* the theorem's
conditions, the theorem's right-hand side (:mod:`pfl_theory.pfedme`, hidden constants 1) is
evaluated with the constants computed from the very problem that ran
(:mod:`pfl_theory.constants`, :mod:`verification.estimators.federation`).

* Over T (``bound_thm1_quadratic``, ``bound_thm1_mlr``): a ``bound`` — HOLDS iff the measured
  gap is at most the bound (constants 1) at every T of a grid spanning ≥ 1.5 decades.  The
  measured gap falls faster than the bound's e^{−η̂₁μ_F T/2}, so bound/measured grows along T:
  a loose upper bound, reported (spread, and the exact worst-case exponent over the class
  from a one-round PEP, :func:`verification.worst_case.analysis.theorem1_exponents`), not
  refuted (issue 24: these were FAILS of a shape band before).
* Over δ² and N/S (``bound_thm1_floor``, ``bound_thm1_sampling``): ``envelope`` — HOLDS iff
  measured/shape stays within :data:`verification.experiments.bound_runs.ENVELOPE_FACTOR`
  (the terms' shapes are the claim there).  The implied constant C is reported.
Theorem 2 is in :mod:`verification.checks.bounds_pfedme_nonconvex`.

Reading (docs/formulas.md §B.6): Theorem 1's averaging weights α_t = (1 − ημ_F/2)^{−(t+1)}
are evaluated with the effective per-round step ηβR (primary) and with the printed local
step η (reported).  Test mutations: :func:`verification.experiments.bound_runs.envelope_with_mutation`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from algorithms.engine.models import QuadraticMean
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import moreau, pfedme
from pfl_theory.constants import mlr_constants, quadratic_constants
from pfl_theory.threads import single_threaded
from verification.estimators import federation as est
from verification.experiments import pfedme_quadratic as ex
from verification.experiments.bound_runs import (ENVELOPE_FACTOR, FACTOR_REASON, MLRAllL2,
                                                 averaged, beta_for, doubling_grid,
                                                 envelope_with_mutation, inner_residual,
                                                 mlr_federation, quadratic_gap, ratio_ends,
                                                 trajectory, with_test_mutation)
from verification.core.registry import Context, Outcome, check
from verification.worst_case.analysis import exponent_sentence, theorem1_exponents
from verification.worst_case.outcome import upper_bound_grid_outcome

PAPER = "pFedMe (NeurIPS 2020)"
F64 = torch.float64


# ------------------------------------------------------------ Theorem 1, quadratic
@check("pfedme.bound_thm1_quadratic", paper=PAPER,
       reference="Theorem 1(a) (strongly convex), docs/formulas.md §B.6", kind="bound",
       quick={"clients": 10, "dim": 5, "lam": 0.25, "local_rounds": 1, "batch": 5,
              "start": 3.0, "reps": 1, "points": 6},
       full={"clients": 20, "dim": 10, "lam": 0.25, "local_rounds": 2, "batch": 5,
             "start": 3.0, "reps": 8, "points": 6})
@single_threaded
def thm1_quadratic(ctx: Context) -> Outcome:
    """E[F(w̄_T) − F*] of the engine's pFedMe on quadratic clients (μ = L from the exact
    Hessians, exact mini-batch prox: ν = 0, δ² from Lemma 1 with the measured γ_f²) against
    Theorem 1(a)'s four terms, over T = T_min·2^j where T_min = 2/(η̂₁μ_F) is the theorem's
    own condition; η = η̂₁/(βR) (the largest step allowed), S = N."""
    p = ctx.params
    fed = ex.quadratic_federation(num_clients=p["clients"], dim=p["dim"], noise=1.0,
                                  samples=2 * 20, seed=ctx.seed)
    model = QuadraticMean(p["dim"])
    x, y = est.client_data(fed)
    n, d, lam, R = p["clients"], p["dim"], p["lam"], p["local_rounds"]
    zero = {"theta": torch.zeros(1, d, dtype=F64)}
    hess = est.client_hessians(model, {"theta": torch.zeros(n, d, dtype=F64)}, x, y)
    curv = quadratic_constants(hess)
    g0, _ = model.grad({"theta": torch.zeros(n, d, dtype=F64)}, x, y)
    A, b = torch.as_tensor(hess), -g0["theta"]                        # f_i = ½θᵀAθ − bᵀθ
    mu_f = lam * curv.mu / (lam + curv.mu)
    kappa_f = lam / mu_f
    beta = beta_for(kappa_f)
    eta_hat = pfedme.eta_hat_1(lam=lam, mu=curv.mu, beta=beta)
    eta = pfedme.local_step_bound(eta_hat=eta_hat, beta=beta, R=R)
    t_min = math.ceil(pfedme.min_rounds_theorem1(lam=lam, mu=curv.mu, beta=beta))
    grid = doubling_grid(t_min, p["points"])
    # exact envelope: w* solves ∇F = 0 (∇²F = mean λA(A+λI)⁻¹, constant)
    hf = moreau.envelope_hessian_quadratic(A, lam=lam).mean(0)
    grad0 = moreau.quadratic_envelope(A, b, torch.zeros(n, d, dtype=F64), lam=lam).grad.mean(0)
    w_star = -torch.linalg.solve(hf, grad0)
    env_star = moreau.quadratic_envelope(A, b, w_star.expand(n, d), lam=lam)
    f_star = float(env_star.value.mean())
    sigma_sq = pfedme.sigma_F1_sq(env_star.grad.numpy())
    gamma_sq = est.gamma_f_sq(model, x, y, [zero])  # exact: the noise of ½‖θ−x‖² is θ-free
    # one inner step with η_p = 1/(L+λ) solves the mini-batch prox exactly (Hessian (1+λ)I)
    if abs(curv.mu - curv.L) > 1e-12:
        raise ValueError("exact one-step prox needs mu == L (QuadraticMean clients)")
    delta_sq = pfedme.lemma1_delta_sq(lam=lam, gamma_f_sq=gamma_sq, batch_size=p["batch"],
                                      nu=0.0, mu=curv.mu)
    alg = PFedMe(lam=lam, lr=eta, personal_lr=1.0 / (curv.L + lam), inner_steps=1,
                 local_rounds=R, batch_size=p["batch"], beta=beta, clients_per_round=n)
    direction = torch.randn(d, generator=torch.Generator().manual_seed(ctx.seed + 1), dtype=F64)
    w0 = w_star + p["start"] * direction / direction.norm()
    delta0 = float(((w0 - w_star) ** 2).sum())

    def gap(ws: np.ndarray) -> np.ndarray:
        env = moreau.quadratic_envelope(A[None], b[None], torch.as_tensor(ws)[:, None, :].expand(
            -1, n, d), lam=lam)
        return env.value.mean(1).numpy() - f_star

    meas = {"eta_beta_R": np.zeros(len(grid)), "eta_printed": np.zeros(len(grid))}
    for rep in range(p["reps"]):
        ws = trajectory(alg, fed, model, {"theta": w0[None].clone()}, int(grid[-1]),
                         ctx.seed * 1000 + rep)
        ws = torch.cat([w["theta"] for w in ws]).numpy()
        meas["eta_beta_R"] += gap(averaged(ws, grid, eta * beta * R, mu_f)) / p["reps"]
        meas["eta_printed"] += gap(averaged(ws, grid, eta, mu_f)) / p["reps"]
    bound = pfedme.theorem1a(T=grid, R=R, N=n, beta=beta, lam=lam, mu=curv.mu,
                             delta_sq=delta_sq, sigma_F1_sq=sigma_sq, Delta0=delta0)
    shape = np.asarray(bound.total, dtype=float)
    other = meas["eta_printed"] / shape
    trivial = float(gap(w0[None].numpy())[0])
    expo = exponent_sentence(theorem1_exponents(lam=lam, mu=curv.mu, L=curv.L, beta=beta,
                                                lr=eta, R=R))
    return upper_bound_with_mutation(
        meas["eta_beta_R"], shape, p,
        detail=(f"{expo}; T = {grid.tolist()}; mu = L = {curv.mu:g} (exact), lam = {lam}, "
                f"beta = {beta:.4g}, eta = eta_hat_1/(beta R) = {eta:.3g}, delta^2 = "
                f"{delta_sq:.3g}, sigma_F1^2 = {sigma_sq:.3g}, Delta0 = {delta0:.3g}; "
                f"{ratio_ends(meas['eta_beta_R'], shape)}; "
                f"printed-eta weights: spread {other.max() / other.min():.3g}; shape with "
                f"C = 1 above the trivial F(w0) - F* = {trivial:.3g} at "
                f"{int((shape >= trivial).sum())}/{len(grid)} grid points"),
        extra={"T": grid.tolist(), "measured": meas["eta_beta_R"].tolist(),
               "measured_printed_eta": meas["eta_printed"].tolist(), "shape": shape.tolist(),
               "terms": {k: np.asarray(v, dtype=float).tolist() for k, v in bound.terms.items()},
               "constants": {"mu": curv.mu, "L": curv.L, "lam": lam, "beta": beta, "eta": eta,
                             "delta_sq": delta_sq, "sigma_F1_sq": sigma_sq, "Delta0": delta0,
                             "gamma_f_sq": gamma_sq}})


def upper_bound_with_mutation(measured, shape, params: dict, **kw) -> Outcome:
    """:func:`verification.worst_case.outcome.upper_bound_grid_outcome` (HOLDS iff measured
    <= the bound with constants 1 at every T; the spread along T is the bound's growing
    looseness, reported — issue 24) with the test mutations of
    :func:`verification.experiments.bound_runs.envelope_with_mutation` applied."""
    m, g = with_test_mutation(measured, shape, params)
    return upper_bound_grid_outcome(m, g, **kw)


def _stationary_setup(model, x, y, A, b, curv, *, lam: float, horizon: int) -> SimpleNamespace:
    """Theorem 1's constants and the optimum of quadratic clients ``f_i = ½θᵀA_iθ − b_iᵀθ``
    (exact envelope Hessian, so w* and σ²_{F,1} at w* are exact): γ_f², μ_F, β, η = η̂₁/β
    (R = 1), T = ``horizon``·T_min, the envelope Hessian ``hf``, w*, σ²_{F,1}."""
    n, d = b.shape
    gamma_sq = est.gamma_f_sq(model, x, y, [{"theta": torch.zeros(1, d, dtype=F64)}])
    mu_f = lam * curv.mu / (lam + curv.mu)
    beta = beta_for(lam / mu_f)
    eta = pfedme.local_step_bound(eta_hat=pfedme.eta_hat_1(lam=lam, mu=curv.mu, beta=beta),
                                  beta=beta, R=1)
    T = horizon * math.ceil(pfedme.min_rounds_theorem1(lam=lam, mu=curv.mu, beta=beta))
    hf = moreau.envelope_hessian_quadratic(A, lam=lam).mean(0)
    grad0 = moreau.quadratic_envelope(A, b, torch.zeros(n, d, dtype=F64), lam=lam).grad.mean(0)
    w_star = -torch.linalg.solve(hf, grad0)
    env_star = moreau.quadratic_envelope(A, b, w_star.expand(n, d), lam=lam)
    return SimpleNamespace(gamma_sq=gamma_sq, mu_f=mu_f, beta=beta, eta=eta, T=T, hf=hf,
                           w_star=w_star, sigma_sq=pfedme.sigma_F1_sq(env_star.grad.numpy()))


def _stationary_gap(alg, fed, model, st: SimpleNamespace, *, reps: int, seed: int) -> float:
    """Mean over ``reps`` runs started at w* of the mean gap F(w̄_t) − F* over t ∈ T/2 … T."""
    total = 0.0
    for rep in range(reps):
        ws = trajectory(alg, fed, model, {"theta": st.w_star[None].clone()}, st.T,
                        seed * 1000 + rep)
        window = np.arange(st.T // 2, st.T + 1)  # stationary from w*: E[gap] is flat in T here
        wbar = averaged(torch.cat([w["theta"] for w in ws]).numpy(), window,
                        st.eta * st.beta, st.mu_f)
        total += float(quadratic_gap(wbar, st.w_star, st.hf).mean()) / reps
    return total


# ------------------------------------------------ Theorem 1, neighbourhood term in δ²
@check("pfedme.bound_thm1_floor", paper=PAPER,
       reference="Theorem 1(a), neighbourhood term λ²δ²/μ_F with Lemma 1's δ², §B.5–B.6",
       kind="envelope", tolerance=ENVELOPE_FACTOR, tolerance_reason=FACTOR_REASON,
       quick={"clients": 10, "dim": 20, "lam": 0.25, "batches": [1, 2, 4, 8, 16, 32],
              "reps": 1, "horizon": 4},
       full={"clients": 20, "dim": 50, "lam": 0.25, "batches": [1, 2, 4, 8, 16, 32],
             "reps": 8, "horizon": 4})
@single_threaded
def thm1_floor(ctx: Context) -> Outcome:
    """Quadratic clients started at w* (Δ₀ = 0), S = N, exact mini-batch prox (ν = 0): only
    the mini-batch noise moves w.  E[F(w̄_T) − F*] at T = ``horizon``·T_min (estimated as the
    mean over T/2 … T of one run's stationary gaps, times ``reps`` runs) against Theorem 1(a)
    over |D| ∈ ``batches`` (δ² = 2γ_f²/(|D|(λ+μ)²) over 1.5 decades)."""
    p = ctx.params
    n, d, lam = p["clients"], p["dim"], p["lam"]
    fed = ex.quadratic_federation(num_clients=n, dim=d, noise=1.0, samples=40, seed=ctx.seed)
    model = QuadraticMean(d)
    x, y = est.client_data(fed)
    zeros = {"theta": torch.zeros(n, d, dtype=F64)}
    curv = quadratic_constants(est.client_hessians(model, zeros, x, y))
    g0, _ = model.grad(zeros, x, y)
    A, b = torch.as_tensor(est.client_hessians(model, zeros, x, y)), -g0["theta"]
    st = _stationary_setup(model, x, y, A, b, curv, lam=lam, horizon=p["horizon"])
    gamma_sq, mu_f, beta, eta, T = st.gamma_sq, st.mu_f, st.beta, st.eta, st.T
    sigma_sq = st.sigma_sq
    batches = np.array(p["batches"])
    deltas = np.array([pfedme.lemma1_delta_sq(lam=lam, gamma_f_sq=gamma_sq, batch_size=int(bs),
                                              nu=0.0, mu=curv.mu) for bs in batches])
    measured = np.zeros(batches.size)
    for j, bs in enumerate(batches):
        alg = PFedMe(lam=lam, lr=eta, personal_lr=1.0 / (curv.L + lam), inner_steps=1,
                     local_rounds=1, batch_size=int(bs), beta=beta, clients_per_round=n)
        measured[j] = _stationary_gap(alg, fed, model, st, reps=p["reps"], seed=ctx.seed)
    bounds = [pfedme.theorem1a(T=T, R=1, N=n, beta=beta, lam=lam, mu=curv.mu, delta_sq=float(ds),
                               sigma_F1_sq=sigma_sq, Delta0=0.0) for ds in deltas]
    shape = np.array([bd.total for bd in bounds])
    neigh = np.array([bd["neighbourhood"] for bd in bounds])
    return envelope_with_mutation(
        measured, shape, p, grid=batches, name="|D|",
        detail=(f"|D| = {batches.tolist()}, delta^2 = {np.round(deltas, 4).tolist()}, T = {T}; "
                f"gamma_f^2 = {gamma_sq:.3g} (exact), mu_F = {mu_f:.3g}, beta = {beta:.4g}; "
                f"neighbourhood lam^2 delta^2/mu_F = {np.round(neigh, 4).tolist()} vs measured "
                f"{np.array2string(measured, precision=3)}"),
        extra={"delta_sq": deltas.tolist(), "measured": measured.tolist(),
               "shape": shape.tolist(), "T": T, "batch": batches.tolist(),
               "terms": {k: [float(bd[k]) for bd in bounds] for k in bounds[0].terms}})


@check("pfedme.bound_thm1_mlr", paper=PAPER,
       reference="Theorem 1(a) (strongly convex), docs/formulas.md §B.6", kind="bound",
       quick={"clients": 5, "dim": 3, "classes": 3, "samples": 20, "l2": 1.0, "lam": 0.25,
              "local_rounds": 1, "inner_steps": 3, "batch": 5, "points": 6},
       full={"clients": 10, "dim": 5, "classes": 3, "samples": 40, "l2": 1.0, "lam": 0.25,
             "local_rounds": 2, "inner_steps": 5, "batch": 5, "points": 6})
@single_threaded
def thm1_mlr(ctx: Context) -> Outcome:
    """E[F(w̄_T) − F*] of the engine's pFedMe on MLR with ℓ2 on all parameters (μ = ℓ2 exact,
    L the bound ℓ2 + ½λ_max(X̃ᵀX̃/n)) against Theorem 1(a) over T = T_min·2^j; F and F* by
    L-BFGS prox (tol 1e-20); δ² from Lemma 1(a) with γ_f² (max per-sample gradient
    variance over the run's iterates) and ν (the engine's worst inner residual)."""
    p = ctx.params
    fed = mlr_federation(p["clients"], p["dim"], p["classes"], p["samples"], ctx.seed)
    model = MLRAllL2(p["dim"], p["classes"], l2=p["l2"])
    x, y = est.client_data(fed)
    n, lam, R = p["clients"], p["lam"], p["local_rounds"]
    curv = mlr_constants([xi.numpy() for xi in x], l2=p["l2"])
    mu_f = lam * curv.mu / (lam + curv.mu)
    beta = beta_for(lam / mu_f)
    eta_hat = pfedme.eta_hat_1(lam=lam, mu=curv.mu, beta=beta)
    eta = pfedme.local_step_bound(eta_hat=eta_hat, beta=beta, R=R)
    t_min = math.ceil(pfedme.min_rounds_theorem1(lam=lam, mu=curv.mu, beta=beta))
    grid = doubling_grid(t_min, p["points"])
    w0 = model.init(1, seed=ctx.seed, dtype=F64)
    f_star, w_star = est.envelope_minimum(model, x, y, w0, lam=lam)
    sigma_sq = pfedme.sigma_F1_sq(est.envelope(model, x, y, w_star, lam=lam).grad.numpy())
    alg = PFedMe(lam=lam, lr=eta, personal_lr=1.0 / (curv.L + lam), inner_steps=p["inner_steps"],
                 local_rounds=R, batch_size=p["batch"], beta=beta, clients_per_round=n)
    ws = trajectory(alg, fed, model, w0, int(grid[-1]), ctx.seed)
    flat = torch.cat([est.flat_params(w) for w in ws]).numpy()
    at_grid = [ws[int(t)] for t in grid]
    gamma_sq = est.gamma_f_sq(model, x, y, [w0, w_star] + at_grid)
    nu = inner_residual(model, fed, alg, [w0, w_star] + at_grid, ctx.seed + 17)
    delta_sq = pfedme.lemma1_delta_sq(lam=lam, gamma_f_sq=gamma_sq, batch_size=p["batch"],
                                      nu=nu, mu=curv.mu)
    delta0 = float(((est.flat_params(w0) - est.flat_params(w_star)) ** 2).sum())

    def gap(vectors: np.ndarray) -> np.ndarray:
        return est.envelope_values(model, x, y, torch.as_tensor(vectors), w0, lam=lam) - f_star

    measured = gap(averaged(flat, grid, eta * beta * R, mu_f))
    printed = gap(averaged(flat, grid, eta, mu_f))
    bound = pfedme.theorem1a(T=grid, R=R, N=n, beta=beta, lam=lam, mu=curv.mu,
                             delta_sq=delta_sq, sigma_F1_sq=sigma_sq, Delta0=delta0)
    shape = np.asarray(bound.total, dtype=float)
    trivial = float(gap(flat[:1])[0])
    other = printed / shape
    expo = exponent_sentence(theorem1_exponents(lam=lam, mu=curv.mu, L=curv.L, beta=beta,
                                                lr=eta, R=R))
    return upper_bound_with_mutation(
        np.maximum(measured, 1e-300), shape, p,
        detail=(f"{expo}; T = {grid.tolist()}; mu = l2 = {curv.mu:g}, L <= {curv.L:.3g}, "
                f"lam = {lam}, "
                f"beta = {beta:.4g}, eta = {eta:.3g}, gamma_f^2 = {gamma_sq:.3g}, nu = "
                f"{nu:.2g}, delta^2 = {delta_sq:.3g}, sigma_F1^2 = {sigma_sq:.3g}, Delta0 = "
                f"{delta0:.3g}; {ratio_ends(measured, shape)}; printed-eta weights: spread "
                f"{other.max() / other.min():.3g}; "
                f"shape (C = 1) above the trivial F(w0) - F* = {trivial:.3g} at "
                f"{int((shape >= trivial).sum())}/{len(grid)} grid points"),
        extra={"T": grid.tolist(), "measured": measured.tolist(),
               "measured_printed_eta": printed.tolist(), "shape": shape.tolist(),
               "terms": {k: np.asarray(v, dtype=float).tolist() for k, v in bound.terms.items()},
               "constants": {"mu": curv.mu, "L": curv.L, "lam": lam, "beta": beta, "eta": eta,
                             "gamma_f_sq": gamma_sq, "nu": nu, "delta_sq": delta_sq,
                             "sigma_F1_sq": sigma_sq, "Delta0": delta0}})


# ------------------------------------------------------- Theorem 1, client sampling
@check("pfedme.bound_thm1_sampling", paper=PAPER,
       reference="Theorem 1(a), client-sampling term (N/S − 1)σ²_{F,1}/(μ_F T N), §B.6",
       kind="envelope", tolerance=ENVELOPE_FACTOR, tolerance_reason=FACTOR_REASON,
       quick={"clients": 66, "sampled": [2, 3, 6, 11, 22, 33], "dim": 20, "lam": 0.25,
              "reps": 1, "horizon": 4},
       full={"clients": 66, "sampled": [2, 3, 6, 11, 22, 33], "dim": 50, "lam": 0.25,
             "reps": 8, "horizon": 4})
@single_threaded
def thm1_sampling(ctx: Context) -> Outcome:
    """Noise-free quadratic clients (γ_f = 0, exact prox: δ = 0) started at w* (Δ₀ = 0), so
    only client sampling moves w: E[F(w̄_T) − F*] at T = ``horizon``·T_min (the mean over
    T/2 … T of one run's stationary gaps, times ``reps`` runs) against Theorem 1(a) over
    S ∈ ``sampled`` (N/S − 1 from 32 to 1, 1.5 decades), R = 1, η = η̂₁/β."""
    p = ctx.params
    n, d, lam = p["clients"], p["dim"], p["lam"]
    fed = ex.quadratic_federation(num_clients=n, dim=d, noise=0.0, samples=4, seed=ctx.seed)
    model = QuadraticMean(d)
    x, y = est.client_data(fed)
    curv = quadratic_constants(est.client_hessians(
        model, {"theta": torch.zeros(n, d, dtype=F64)}, x, y))
    g0, _ = model.grad({"theta": torch.zeros(n, d, dtype=F64)}, x, y)
    A, b = torch.eye(d, dtype=F64).expand(n, d, d) * curv.mu, -g0["theta"]
    st = _stationary_setup(model, x, y, A, b, curv, lam=lam, horizon=p["horizon"])
    gamma_sq, mu_f, beta, eta, T = st.gamma_sq, st.mu_f, st.beta, st.eta, st.T
    sigma_sq = st.sigma_sq
    sampled = np.array(p["sampled"])
    measured = np.zeros(sampled.size)
    for j, s in enumerate(sampled):
        alg = PFedMe(lam=lam, lr=eta, personal_lr=1.0 / (curv.L + lam), inner_steps=1,
                     local_rounds=1, batch_size=1, beta=beta, clients_per_round=int(s))
        measured[j] = _stationary_gap(alg, fed, model, st, reps=p["reps"], seed=ctx.seed)
    bound = pfedme.theorem1a(T=T, R=1, N=n, S=sampled, beta=beta, lam=lam, mu=curv.mu,
                             delta_sq=0.0, sigma_F1_sq=sigma_sq, Delta0=0.0)
    shape = np.asarray(bound.total, dtype=float)
    ratio = n / sampled - 1.0
    return envelope_with_mutation(
        measured, shape, p, grid=sampled, name="S",
        detail=(f"N/S - 1 = {ratio.tolist()}, T = {T}; gamma_f^2 = {gamma_sq:g} "
                f"(exact), sigma_F1^2 = {sigma_sq:.3g}, mu_F = {mu_f:.3g}, beta = {beta:.4g}; "
                f"{p['reps']} runs per S"),
        extra={"N/S-1": ratio.tolist(), "measured": measured.tolist(), "shape": shape.tolist(),
               "T": T, "terms": {k: np.asarray(v, dtype=float).tolist()
                                 for k, v in bound.terms.items()}})
