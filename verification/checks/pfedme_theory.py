"""pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020) theory checks, docs/formulas.md §E.B items 1–5,
plus the rate-exponent derivations of §B.6 (Corollaries 1 and 2). All in float64."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from pfl_theory import moreau, pfedme, rates
from verification.estimators.fitting import fit_loglog
from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import outcome

PAPER = "pFedMe (NeurIPS 2020)"
F64 = torch.float64


def random_quadratics(g: torch.Generator, n: int, d: int, lo: float, hi: float):
    """n symmetric d×d matrices with eigenvalues in [lo, hi] (both extremes attained) and
    linear terms b ~ N(0, I)."""
    q, _ = torch.linalg.qr(torch.randn(n, d, d, generator=g, dtype=F64))
    eig = lo + (hi - lo) * torch.rand(n, d, generator=g, dtype=F64)
    eig[:, 0], eig[:, -1] = lo, hi
    return q @ torch.diag_embed(eig) @ q.transpose(1, 2), torch.randn(n, d, generator=g, dtype=F64)


def _fd_grad(F, w: torch.Tensor, h: float) -> torch.Tensor:
    """Central differences of a batched F: [N, d] -> [N], all 2d evaluations at once."""
    n, d = w.shape
    e = h * torch.eye(d, dtype=w.dtype)
    pts = torch.cat([w[:, None] + e, w[:, None] - e], 1).reshape(n * 2 * d, d)
    vals = F(pts, np.repeat(np.arange(n), 2 * d)).reshape(n, 2, d)
    return (vals[:, 0] - vals[:, 1]) / (2 * h)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


@check("pfedme.envelope_gradient", paper=PAPER, reference="Proposition 1, eq. (6)",
       kind="identity", tolerance=1e-6,
       tolerance_reason="central differences with h=1e-5 (error ~1e-9) on F solved to "
                        "||grad h||^2 <= 1e-22", quick={"clients": 4, "dim": 5, "m": 30},
       full={"clients": 16, "dim": 10, "m": 100})
def envelope_gradient(ctx: Context) -> Outcome:
    """∇F(w) = λ(w − θ̂(w)) against autograd and finite differences: SPD quadratics
    (closed form), logistic loss (L-BFGS inner solve), non-convex quadratics with λ > 2L."""
    p, g = ctx.params, torch.Generator().manual_seed(ctx.seed)
    n, d, lam, h = p["clients"], p["dim"], 2.0, 1e-5
    errs = {}
    for case, (lo, hi) in {"quadratic": (0.5, 3.0), "nonconvex_quadratic": (-0.8, 0.8)}.items():
        A, b = random_quadratics(g, n, d, lo, hi)
        w = torch.randn(n, d, generator=g, dtype=F64, requires_grad=True)
        env = moreau.quadratic_envelope(A, b, w, lam=lam)  # λ = 2 > 2L = 1.6 when non-convex
        auto = torch.autograd.grad(env.value.sum(), w)[0]
        fd = _fd_grad(lambda x, i: moreau.quadratic_envelope(A[i], b[i], x, lam=lam).value,
                      w.detach(), h)
        errs[f"{case}: autograd"] = _rel(env.grad.detach(), auto)
        errs[f"{case}: finite differences"] = _rel(env.grad.detach(), fd)
    X = torch.randn(n, p["m"], d, generator=g, dtype=F64)
    y = torch.where(torch.rand(n, p["m"], generator=g, dtype=F64) < 0.5, -1.0, 1.0).to(F64)

    def logistic(i):
        return lambda th: torch.nn.functional.softplus(
            -y[i] * torch.einsum("nmd,nd->nm", X[i], th)).mean(-1)

    w = torch.randn(n, d, generator=g, dtype=F64)
    env = moreau.prox(logistic(np.arange(n)), w, lam=lam, tol=1e-22)
    fd = _fd_grad(lambda x, i: moreau.prox(logistic(i), x, lam=lam, tol=1e-22).value, w, h)
    errs["logistic: finite differences"] = _rel(env.grad, fd)
    worst = max(errs.values())
    return Outcome(measured=errs, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=f"max relative error of λ(w−θ̂) vs autograd/FD: {worst:.2e}")


@check("pfedme.prop1_constants", paper=PAPER, reference="Proposition 1 (L_F=λ, μ_F=λμ/(λ+μ))",
       kind="inequality", tolerance=1e-12,
       tolerance_reason="float64 eigenvalues of λA(A+λI)^-1, relative round-off ~1e-14",
       quick={"count": 50, "dim": 6}, full={"count": 1000, "dim": 12})
def prop1_constants(ctx: Context) -> Outcome:
    """Eigenvalues of ∇²F = λA(A+λI)⁻¹ lie in [μ_F, λL/(λ+L)] ⊂ [μ_F, λ] for μI ⪯ A ⪯ LI;
    with a negative eigenvalue −L, |eig| ≤ λ exactly when λ ≥ 2L."""
    p, g, tol = ctx.params, torch.Generator().manual_seed(ctx.seed), ctx.tolerance
    mu, L = 0.3, 4.0
    A, _ = random_quadratics(g, p["count"], p["dim"], mu, L)
    viol = 0.0
    for lam in (0.5, 4.0, 15.0, 100.0):
        c = moreau.moreau_constants(lam=lam, mu=mu, L=L)
        ev = torch.linalg.eigvalsh(moreau.envelope_hessian_quadratic(A, lam=lam))
        upper = lam * L / (lam + L)
        viol = max(viol, float((c.mu_F - ev.min()) / c.mu_F), float((ev.max() - upper) / upper),
                   float(upper > c.L_F))
        # every constant computed a second time here (issue 41: κ_F was read by no check):
        # μ_F = λμ/(λ+μ), L_F = λ, κ_F = L_F/μ_F = 1 + λ/μ, and the measured condition
        # number of ∇²F (eigenvalues of λA(A+λI)⁻¹) at most κ_F
        own = {"mu_F": lam * mu / (lam + mu), "L_F": lam, "kappa_F": (lam + mu) / mu}
        viol = max(viol, *(abs(getattr(c, k) - v) / v for k, v in own.items()),
                   float(((ev.max(-1).values / ev.min(-1).values).max() - c.kappa_F)
                         / c.kappa_F))
    An, _ = random_quadratics(g, p["count"], p["dim"], -L, L)
    mismatches = []
    for lam in np.linspace(1.1 * L, 4 * L, 12):
        ev = torch.linalg.eigvalsh(moreau.envelope_hessian_quadratic(An, lam=float(lam)))
        within = bool(ev.abs().max() <= lam * (1 + tol))
        if within != (lam >= 2 * L):
            mismatches.append(round(float(lam), 3))
    holds = viol <= tol and not mismatches
    return Outcome(measured={"max_relative_violation": viol, "iff_mismatches": mismatches},
                   theoretical={"max_relative_violation": 0.0, "iff_mismatches": []},
                   holds=holds, detail=f"eigenvalue bound violation {viol:.1e}; λ values where "
                   f"'|eig|≤λ ⇔ λ≥2L' fails: {mismatches or 'none'}")


@check("pfedme.envelope_sanity", paper=PAPER, reference="§3.1 Moreau envelope; Proposition 1",
       kind="inequality", tolerance=1e-8,
       tolerance_reason="scipy BFGS on F stops at gradient norm 1e-10; F-gaps are O(1e-12)",
       quick={"clients": 8, "dim": 5}, full={"clients": 64, "dim": 20})
def envelope_sanity(ctx: Context) -> Outcome:
    """F(w) ≤ f(w); F ↑ f as λ → ∞ with λ(f − F) → ½‖∇f(w)‖²; min F = min f (convex f)."""
    from scipy.optimize import minimize

    p, g = ctx.params, torch.Generator().manual_seed(ctx.seed)
    A, b = random_quadratics(g, p["clients"], p["dim"], 0.5, 5.0)
    w = 3 * torch.randn(p["clients"], p["dim"], generator=g, dtype=F64)
    f_w = moreau.quadratic_value(A, b, w)
    lams = 10.0 ** np.arange(-1, 7)
    gaps = torch.stack([f_w - moreau.quadratic_envelope(A, b, w, lam=float(l)).value
                        for l in lams])
    half_grad_sq = 0.5 * ((A @ w[..., None])[..., 0] - b).pow(2).sum(-1)
    out = {"max(F - f)": float(-gaps.min()),
           "non-monotone steps in lambda": int((gaps[1:] > gaps[:-1] + 1e-12).sum()),
           "rel err lambda*(f-F) vs |grad f|^2/2 at lambda=1e6":
               float(((lams[-1] * gaps[-1] - half_grad_sq) / half_grad_sq).abs().max())}
    worst_min = 0.0
    for i in range(p["clients"]):
        Ai, bi = A[i].numpy(), b[i].numpy()
        res = minimize(lambda x: float(moreau.quadratic_envelope(Ai, bi, x, lam=1.0).value),
                       np.zeros(p["dim"]), method="BFGS", options={"gtol": 1e-10},
                       jac=lambda x: moreau.quadratic_envelope(Ai, bi, x, lam=1.0).grad)
        f_min = -0.5 * bi @ np.linalg.solve(Ai, bi)
        worst_min = max(worst_min, abs(res.fun - f_min) / max(1.0, abs(f_min)))
    out["rel |min F - min f|"] = worst_min
    holds = (out["max(F - f)"] <= 0 and out["non-monotone steps in lambda"] == 0
             and out["rel err lambda*(f-F) vs |grad f|^2/2 at lambda=1e6"] <= 1e-4  # O(1/λ)
             and worst_min <= ctx.tolerance)
    return Outcome(measured=out, theoretical={"max(F - f)": "<= 0", "min F - min f": 0.0},
                   holds=holds, detail="; ".join(f"{k}: {v:.2e}" for k, v in out.items()))


def _lemma1_mc(g, *, reps, d, lam, lo, hi, gamma_sq, batch, nu):
    A, b = random_quadratics(g, 1, d, lo, hi)
    xi = math.sqrt(gamma_sq / d) * torch.randn(reps, batch, d, generator=g, dtype=F64)
    b_noisy = b + xi.mean(1)  # mini-batch gradient of f̃ = ½θᵀAθ − (b + ξ)ᵀθ: noise γ²/|D|
    w = torch.randn(1, d, generator=g, dtype=F64).expand(reps, d)
    f = lambda th: 0.5 * torch.einsum("nd,de,ne->n", th, A[0], th) - (b_noisy * th).sum(-1)
    env = moreau.prox(f, w, lam=lam, tol=nu, method="gd", step=1.0 / (lam + max(abs(lo), hi)))
    exact = moreau.quadratic_prox(A[0], b[0], w, lam=lam)
    sq = (env.theta_hat - exact).pow(2).sum(-1)
    return float(sq.mean()), float(sq.std() / math.sqrt(reps))


@check("pfedme.lemma1_delta", paper=PAPER, reference="Lemma 1 (δ² both cases)",
       kind="inequality", quick={"reps": 4000, "dim": 5}, full={"reps": 100000, "dim": 10})
def lemma1_delta(ctx: Context) -> Outcome:
    """Monte-Carlo E‖θ̃ − θ̂‖² (inner GD stopped at ‖∇h̃‖² ≤ ν on a noisy mini-batch quadratic)
    against δ² = 2/(λ±·)²(γ_f²/|D| + ν), strongly convex (λ+μ) and non-convex (λ−L) cases."""
    p, g = ctx.params, torch.Generator().manual_seed(ctx.seed)
    common = dict(reps=p["reps"], d=p["dim"], gamma_sq=4.0, batch=8, nu=0.05)
    lam, mu, L = 3.0, 0.5, 1.0
    mc_sc, se_sc = _lemma1_mc(g, lam=lam, lo=mu, hi=4.0, **common)
    mc_nc, se_nc = _lemma1_mc(g, lam=lam, lo=-L, hi=L, **common)
    bound_sc = pfedme.lemma1_delta_sq(lam=lam, mu=mu, gamma_f_sq=4.0, batch_size=8, nu=0.05)
    bound_nc = pfedme.lemma1_delta_sq(lam=lam, L=L, gamma_f_sq=4.0, batch_size=8, nu=0.05)
    measured = {"strongly_convex": mc_sc, "nonconvex": mc_nc}
    theoretical = {"strongly_convex": bound_sc, "nonconvex": bound_nc}
    return Outcome(measured=measured, theoretical=theoretical,
                   holds=mc_sc <= bound_sc and mc_nc <= bound_nc,
                   detail=f"E‖θ̃−θ̂‖²/δ²: strongly convex {mc_sc / bound_sc:.3f} "
                          f"(±{se_sc / bound_sc:.3f}),"
                          f" non-convex {mc_nc / bound_nc:.3f} (±{se_nc / bound_nc:.3f})")


def _diversity(grads: torch.Tensor) -> torch.Tensor:
    return (grads - grads.mean(-2, keepdim=True)).pow(2).sum(-1).mean(-1)


@check("pfedme.lemma2_diversity", paper=PAPER, reference="Lemma 2 (a) and (b)",
       kind="inequality", tolerance=1e-10,
       tolerance_reason="float64 closed-form envelopes; relative round-off ~1e-13",
       quick={"clients": 10, "dim": 5, "points": 200}, full={"clients": 100, "dim": 20,
                                                             "points": 5000})
def lemma2_diversity(ctx: Context) -> Outcome:
    """(a) (1/N)Σ‖∇F_i − ∇F‖² ≤ 4λ(F(w)−F(w*)) + 2σ²_{F,1}; (b) ≤ 8L²/(λ²−8L²)‖∇F‖² + σ²_{F,2}
    on random heterogeneous quadratics (b: shared Hessian in [−L, L], so A3 holds exactly
    with σ_f² = (1/N)Σ‖b_i − b̄‖²; λ = 3L > 2√2L)."""
    p, g = ctx.params, torch.Generator().manual_seed(ctx.seed)
    n, d, k = p["clients"], p["dim"], p["points"]
    # points at distances 1e-3 … 1e1 around the origin and around w* (where (a) is tightest)
    scales = 10.0 ** torch.linspace(-3, 1, k, dtype=F64)[:, None, None]
    U = scales * torch.randn(k, 1, d, generator=g, dtype=F64)
    A, b = random_quadratics(g, n, d, 0.2, 3.0)
    lam = 2.0
    H = moreau.envelope_hessian_quadratic(A, lam=lam)
    c = lam * torch.linalg.solve(A + lam * torch.eye(d, dtype=F64), b[..., None])[..., 0]
    w_star = torch.linalg.solve(H.sum(0), c.sum(0))
    env_star = moreau.quadratic_envelope(A, b, w_star.expand(n, d), lam=lam)
    s1 = pfedme.sigma_F1_sq(env_star.grad.numpy())
    W = (U + w_star * (torch.arange(k) % 2 == 0)[:, None, None]).expand(k, n, d)
    env = moreau.quadratic_envelope(A, b, W, lam=lam)
    gap = env.value.mean(-1) - env_star.value.mean()
    lhs_a = _diversity(env.grad)
    rhs_a = torch.tensor([pfedme.lemma2a_bound(lam=lam, F_gap=max(float(x), 0.0),
                                               sigma_F1_sq=s1) for x in gap])
    L = 1.0
    A2, _ = random_quadratics(g, 1, d, -L, L)
    b2 = torch.randn(n, d, generator=g, dtype=F64)
    lam2 = 3.0 * L
    sigma_f_sq = float((b2 - b2.mean(0)).pow(2).sum(-1).mean())
    env2 = moreau.quadratic_envelope(A2.expand(n, d, d), b2, U.expand(k, n, d), lam=lam2)
    lhs_b = _diversity(env2.grad)
    rhs_b = torch.tensor([pfedme.lemma2b_bound(lam=lam2, L=L, grad_F_norm_sq=float(gn),
                                               sigma_f_sq=sigma_f_sq)
                          for gn in env2.grad.mean(-2).pow(2).sum(-1)])
    ratio_a, ratio_b = float((lhs_a / rhs_a).max()), float((lhs_b / rhs_b).max())
    holds = ratio_a <= 1 + ctx.tolerance and ratio_b <= 1 + ctx.tolerance
    return Outcome(measured={"max LHS/RHS (a)": ratio_a, "max LHS/RHS (b)": ratio_b},
                   theoretical={"max LHS/RHS (a)": "<= 1", "max LHS/RHS (b)": "<= 1"},
                   holds=holds, detail=f"worst LHS/RHS over {k} points: (a) {ratio_a:.3f}, "
                                       f"(b) {ratio_b:.3f}")


def _numeric_slopes(fn, grid) -> dict[str, float]:
    """Log-log slopes of a numeric bound along each variable of ``grid``."""
    return {v: float(fit_loglog(xs, fn(v, xs), n_boot=50).slope) for v, xs in grid.items()}


@check("pfedme.corollary1_rate_reading", paper=PAPER,
       reference="Theorem 1(a) third term, Corollary 1(i) (docs/formulas.md §B.6, UNCERTAIN reading)",
       kind="rate", tolerance=1e-6,
       tolerance_reason="numeric log-log slope of an exact power law (δ=0): round-off only")
def corollary1_rate_reading(ctx: Context) -> Outcome:
    """Substitute Corollary 1(i)'s β = √(N/T) (default reading) into Theorem 1(a)'s drift
    term; does the claimed O(1/(TRN)) follow? Exponents symbolic (sympy) and numeric."""
    d = rates.corollary1_derivation()

    def drift(v, xs):
        base = {"T": 1e3, "R": 10.0, "N": 1e4}
        vals = []
        for x in xs:
            q = dict(base, **{v: x})
            beta = math.sqrt(q["N"] / q["T"])
            vals.append(pfedme.theorem1a(T=q["T"], R=q["R"], N=q["N"], beta=beta, lam=15.0,
                                         mu=1.0, delta_sq=0.0, sigma_F1_sq=1.0, Delta0=1.0,
                                         check_conditions=False)["drift"])
        return np.array(vals)

    grid = {"T": np.array([1e2, 3e2, 1e3]), "R": np.array([5.0, 20.0, 80.0]),
            "N": np.array([1e4, 1e5, 1e6])}
    num = _numeric_slopes(drift, grid)
    sym = {k: float(v) for k, v in d.exponents.items()}
    if max(abs(num[k] - sym[k]) for k in sym) > ctx.tolerance:
        raise RuntimeError(f"numeric slopes {num} disagree with sympy exponents {sym}")
    alt = {r: rates.corollary1_derivation(r).follows for r in rates.COROLLARY1_CHOICES}
    # ERRATUM: the printed reading does not give the claimed rate but another reading of
    # the same choice (i) does (docs/formulas.md §B.6: β = √(NR/T) gives exactly 1/(TRN))
    corrected = [r for r, ok in alt.items() if ok and r.startswith("(i)")]
    verdict = (Verdict.HOLDS if d.follows else Verdict.ERRATUM if corrected else Verdict.FAILS)
    # ERRATUM here is algebra on our own expressions: no run measures the corrected reading
    return outcome(verdict, measured=sym, theoretical={k: float(v) for k, v in d.claimed.items()},
                   erratum_basis="algebra",
                   detail=f"{verdict.value}: corrected reading(s) {corrected or 'none'}; "
                          f"β=√(N/T): drift ∝ T^{sym['T']:g} R^{sym['R']:g} N^{sym['N']:g} "
                          f"(numeric slopes agree); corollary rate follows per reading: {alt}")


@check("pfedme.corollary2_rate_reading", paper=PAPER,
       reference="Theorem 2(a) third term, Corollary 2 (docs/formulas.md §B.6, UNCERTAIN reading)",
       kind="rate", tolerance=1e-6,
       tolerance_reason="numeric log-log slope of exact power laws (δ=0): round-off only")
def corollary2_rate_reading(ctx: Context) -> Outcome:
    """Corollary 2: β = N^{1/2}R^{1/4}, T = (NR)², default R^{1/3} reading of Theorem 2(a);
    does O((TRN)^{-2/3}) = O((NR)^{-2}) follow? Exponents symbolic (sympy) and numeric."""
    d = rates.corollary2_derivation()

    def terms(v, xs, name):
        out = []
        for x in xs:
            q = dict({"R": 10.0, "N": 100.0}, **{v: x})
            beta, T = pfedme.corollary2_choice(N=int(q["N"]), R=int(q["R"]))
            out.append(pfedme.theorem2a(T=T, R=q["R"], N=q["N"], beta=beta, lam=3.0, L=1.0,
                                        delta_sq=0.0, sigma_F2_sq=1.0, Delta_F=1.0)[name])
        return np.array(out)

    grid = {"R": np.array([10.0, 100.0, 1000.0]), "N": np.array([10.0, 100.0, 1000.0])}
    # with δ = 0 each term is an exact power law; the sum's exponent is the larger one
    per_term = {t: _numeric_slopes(lambda v, xs: terms(v, xs, t), grid)
                for t in ("initial", "drift")}
    num = {v: max(per_term["initial"][v], per_term["drift"][v]) for v in grid}
    sym = {k: float(v) for k, v in d.coupled.items()}
    if max(abs(num[k] - sym[k]) for k in sym) > ctx.tolerance:
        raise RuntimeError(f"numeric slopes {num} disagree with sympy exponents {sym}")
    alt = rates.corollary2_derivation(sp.Rational(2, 3))
    verdict = (Verdict.HOLDS if d.follows else Verdict.ERRATUM if alt.follows else Verdict.FAILS)
    # ERRATUM here is algebra on our own expressions: no run measures the corrected reading
    return outcome(verdict, erratum_basis="algebra", measured={"coupled": sym,
                                      "drift": {k: float(v) for k, v in d.exponents.items()}},
                   theoretical={k: float(v) for k, v in d.claimed_coupled.items()},
                   detail=f"{verdict.value} (corrected reading R^(2/3) in Theorem 2(a)'s third "
                          f"term); "
                          f"with R^(1/3): bound ∝ R^{sym['R']:.4g} N^{sym['N']:.4g} under T=(NR)² "
                          f"(numeric slopes R {num['R']:.4f}, N {num['N']:.4f}); claimed (NR)^-2. "
                          f"Reading R^(2/3) follows: {alt.follows}")
