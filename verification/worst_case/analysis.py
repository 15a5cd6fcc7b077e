"""One setting analysed: exact worst case beside the paper's bound, and the step sizes.

What ``pflt worst-case`` prints and the worst-case figures plot.  For pFedMe (Dinh, Tran,
Nguyen, NeurIPS 2020): the exact worst case of Theorem 1(a)'s F(w̄_T) − F* (strongly convex
class) or Theorem 2(a)'s (1/T)Σ‖∇F(w_t)‖² (L-smooth class) at the given sizes, the bound
(:mod:`pfl_theory.pfedme`, hidden constants 1, δ² = 0: full batch; with a K-step inner
solve δ² = 0 is the bound's smallest value), whether the theorem's hypotheses hold, the
exact envelope constants against Proposition 1's, the exact one-round contraction ρ at the
given step, the largest step with ρ < 1 (bisection on one-round PEPs) next to the theorem's
admissible step η̂/(βR), and the engine on a quadratic instance.  For FedAvg (no theorem in
the seed papers) the bound column is the textbook rate of the homogeneous case (R·T
gradient steps), exact when σ² = 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from pfl_theory import pfedme
from verification.worst_case import instances, noisy_instances, stochastic
from verification.worst_case import problems as P

#: the largest exact PEP the command solves: T·R·K oracle calls per client (measured on the
#: shared 2-core CPU, N = 2, Clarabel: 16 calls (exact prox, T = 3, R = 5) 6.6 s; 24 calls
#: (K = 2, T = 3, R = 4) 46 s; 30 calls did not finish in 200 s, 45 not in 600 s)
MAX_CALLS = 24
MAX_CLIENTS = 4


#: the largest magnitude of a parameter: the SDP solves to ~1e-8 relative, so scales beyond
#: 1e6 (products of two of them reach 1e12) leave its accuracy (``--delta0 1e308`` gave an
#: "unbounded" answer after 45 s, ``--sigma-sq 1e308`` a number)
MAX_SCALE = 1e6
#: enumerated sampling paths times oracle calls per path: the sampled PEP's size
MAX_SAMPLED_CALLS = 48


def check_number(name: str, value, *, positive: bool) -> None:
    """A finite number, > 0 (``positive``) or ≥ 0, at most :data:`MAX_SCALE` (one-line
    ``ValueError``)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if not positive and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if abs(value) > MAX_SCALE:
        raise ValueError(f"{name} = {value:g} is beyond {MAX_SCALE:g}: the SDP's accuracy "
                         f"(~1e-8 relative) does not reach that scale")


def validate(s: P.Setting) -> None:
    """Sizes a PEP can solve, and parameters of the classes (one-line ``ValueError``),
    before any solve."""
    for name in ("clients", "rounds", "local_rounds", "batch_size"):
        v = getattr(s, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    for name in ("lr", "lam", "beta", "L", "Delta0"):
        check_number(name, getattr(s, name), positive=True)
    for name in ("sigma_sq", "inner_accuracy"):
        check_number(name, getattr(s, name), positive=False)
    for name in ("noise_sq", "delta_sq", "mu"):
        if getattr(s, name) is not None:
            check_number(name, getattr(s, name), positive=name == "mu")
    calls = s.rounds * s.local_rounds * (s.inner[0] if s.inner else 1)
    if calls > MAX_CALLS:
        raise ValueError(f"rounds × local rounds × inner steps = {calls} oracle calls per "
                         f"client: more than {MAX_CALLS}, too large for an exact PEP")
    if not 1 <= s.clients <= MAX_CLIENTS:
        raise ValueError(f"--clients must be 1 … {MAX_CLIENTS}, got {s.clients} (N = 2 "
                         f"equals N = 3 in the homogeneous case)")
    if s.mu is not None and not 0 < s.mu < s.L:
        raise ValueError(f"need 0 < mu < L, got mu={s.mu}, L={s.L}")
    if s.mu is None and s.clients != 1:
        raise ValueError("the non-convex PEP is the homogeneous case (identical clients, "
                         "σ_f = 0): use --clients 1")
    if s.mu is None and s.lam <= s.L:
        raise ValueError(f"the non-convex envelope needs lam > L, got lam={s.lam}, L={s.L}")
    if s.inner is not None and not (isinstance(s.inner[0], int) and s.inner[0] >= 1):
        raise ValueError(f"inner steps must be an integer >= 1, got {s.inner[0]!r}")
    if s.inner is not None:
        check_number("personal_lr", s.inner[1], positive=True)
    _validate_randomness(s, calls)


def _validate_randomness(s: P.Setting, calls: int) -> None:
    if s.sampled is not None:
        if isinstance(s.sampled, bool) or not isinstance(s.sampled, int) \
                or not 1 <= s.sampled <= s.clients:
            raise ValueError(f"--sampled S must be an integer in 1 … N = {s.clients}, got "
                             f"{s.sampled!r}")
        from verification.worst_case.stochastic import MAX_PATHS, path_count
        paths = path_count(s)
        if paths > MAX_PATHS or paths * calls > MAX_SAMPLED_CALLS:
            raise ValueError(f"C(N, S)^T = {paths} sampling paths × {calls} oracle calls: "
                             f"more than {MAX_PATHS} paths or {MAX_SAMPLED_CALLS} calls, too "
                             f"large for an exact PEP (use fewer rounds)")
    if s.method == "fedavg" and (s.inner_accuracy or s.delta_sq is not None):
        raise ValueError("--inner-accuracy and --delta-sq are pFedMe's inner solve; FedAvg "
                         "has none")
    if s.inner is not None and (s.inner_accuracy or s.delta_sq is not None):
        raise ValueError("--inner-accuracy and --delta-sq describe an inexact prox: with "
                         "--prox steps the inner solve is the K steps themselves")
    if s.delta_sq is not None and (s.noise_sq is not None or s.inner_accuracy):
        raise ValueError("--delta-sq is Lemma 1's conclusion δ² itself: give either it or "
                         "--noise-sq/--inner-accuracy (which make δ² = 2(ν + V/|D|)/(λ+μ)²)")
    if s.batch_size != 1 and s.noise_sq is None:
        raise ValueError("--batch-size divides the gradient noise: it needs --noise-sq")


def analyse(s: P.Setting, *, contraction: bool = True, solver: str = "clarabel",
            seed: int = 0) -> dict[str, Any]:
    """Everything of the module docstring for ``s`` as a JSON-ready dict."""
    validate(s)
    out: dict[str, Any] = {"setting": asdict(s), "solver": solver}
    if s.method == "fedavg":
        return _fedavg(s, out, contraction, solver, seed)
    metric = "grad_sq_avg" if s.mu is None else "gap_avg"
    solved = P.federated(s, metric, solver=solver)
    meas, se = noisy_instances.measured_for(s, metric)
    out.update(metric=metric, worst_case=solved.value, status=solved.status,
               seconds=solved.seconds, gram_size=solved.gram_size, measured=meas,
               measured_se=se, exact=s.exact_expectation, delta_sq=stochastic.bound_delta_sq(s))
    if s.mu is None:
        out.update(_theorem2(s))
        # the theorem's own F(w⁰) − F* ≤ Δ_F (a value below every evaluated f) beside the
        # relaxed F(w⁰) − F(w_T) ≤ Δ_F: at the theorem's tiny steps the relaxed one lets
        # ‖∇F‖² reach ≈ Δ_F/(ηT), the theorem's condition caps it by smoothness
        out["worst_case_theorem_condition"] = P.federated(
            replace(s, lower_value=True), metric, solver=solver).value
    else:
        out.update(_theorem1(s))
        out["envelope"] = {"L_exact": P.envelope_constant(mu=s.mu, L=s.L, lam=s.lam, which="L",
                                                          solver=solver),
                           "L_paper": s.lam, "mu_exact": P.envelope_constant(
                               mu=s.mu, L=s.L, lam=s.lam, which="mu", solver=solver),
                           "mu_paper": s.mu_F}
    out["looseness"] = out["bound"] / out["worst_case"] if out["worst_case"] > 0 else math.inf
    if contraction and s.mu is not None:
        out["rho"] = P.one_round_rate(s, solver=solver)
        out["largest_contracting_step"] = P.largest_contracting_step(s, solver=solver)
    return out


def theorem1_setting(p: dict) -> P.Setting:
    """Theorem 1's largest admissible step η = η̂₁/(βR) with β = 128κ_F (then η̂₁ =
    1/(24λ)) and T = ⌈2/(η̂₁μ_F)⌉, the theorem's own minimum horizon."""
    lam, mu, R = p["lam"], p["mu"], p["local_rounds"]
    beta = p.get("beta") or 128 * (lam + mu) / mu
    eta = pfedme.local_step_bound(eta_hat=pfedme.eta_hat_1(lam=lam, mu=mu, beta=beta),
                                  beta=beta, R=R)
    T = math.ceil(pfedme.min_rounds_theorem1(lam=lam, mu=mu, beta=beta))
    inner = None if p.get("inner_steps") is None else \
        (p["inner_steps"], 1.0 / (p["L"] + lam))
    return P.Setting(clients=p["clients"], rounds=T, local_rounds=R, lr=eta, lam=lam,
                     beta=beta, mu=mu, L=p["L"], inner=inner, sigma_sq=p["sigma_sq"],
                     Delta0=1.0)


def _theorem1(s: P.Setting) -> dict[str, Any]:
    bound = pfedme.theorem1a(T=s.rounds, R=s.local_rounds, N=s.clients, S=s.sampled,
                             beta=s.beta, lam=s.lam, mu=s.mu,
                             delta_sq=stochastic.bound_delta_sq(s), sigma_F1_sq=s.sigma_sq,
                             Delta0=s.Delta0, check_conditions=False)
    beta_ok = s.beta >= 1
    eta_hat = pfedme.eta_hat_1(lam=s.lam, mu=s.mu, beta=max(s.beta, 1.0))
    admissible = eta_hat / (max(s.beta, 1.0) * s.local_rounds)
    t_min = pfedme.min_rounds_theorem1(lam=s.lam, mu=s.mu, beta=max(s.beta, 1.0))
    return {"theorem": "pFedMe Theorem 1(a)", "bound": float(bound.total),
            "terms": {k: float(v) for k, v in bound.terms.items()},
            "admissible_step": admissible, "T_min": t_min,
            "hypotheses": {"beta >= 1": beta_ok, "eta <= eta_hat_1/(beta R)": s.lr <= admissible,
                           "T >= 2/(eta_hat_1 mu_F)": s.rounds >= t_min}}


def _theorem2(s: P.Setting) -> dict[str, Any]:
    bound = pfedme.theorem2a(T=s.rounds, R=s.local_rounds, N=s.clients, S=s.sampled,
                             beta=s.beta, lam=s.lam, L=s.L,
                             delta_sq=stochastic.bound_delta_sq(s), sigma_F2_sq=0.0,
                             Delta_F=s.Delta0, check_conditions=False)
    lam_ok = s.lam >= math.sqrt(8 * s.L ** 2 + 1)
    admissible = 1.0 / (75 * s.lam ** 3) / (max(s.beta, 1.0) * s.local_rounds)
    return {"theorem": "pFedMe Theorem 2(a) (homogeneous: σ_f = 0)", "bound": float(bound.total),
            "terms": {k: float(v) for k, v in bound.terms.items()},
            "admissible_step": admissible,
            "hypotheses": {"beta >= 1": s.beta >= 1, "lam >= sqrt(8L^2+1)": lam_ok,
                           "eta <= eta_hat_2/(beta R)": s.lr <= admissible}}


def _fedavg(s, out, contraction, solver, seed):
    solved = P.federated(s, "dist", solver=solver)
    q = max(abs(1 - s.lr * s.mu), abs(1 - s.lr * s.L))
    meas, se = noisy_instances.measured_for(s, "dist")
    out.update(metric="dist", worst_case=solved.value, status=solved.status,
               seconds=solved.seconds, gram_size=solved.gram_size, measured=meas,
               measured_se=se, exact=s.exact_expectation,
               theorem="textbook: R·T gradient steps on S(μ, L) (exact when σ² = 0 and "
                       "the gradients are exact)",
               bound=q ** (2 * s.rounds * s.local_rounds) * s.Delta0,
               admissible_step=2.0 / s.L,
               hypotheses={"sigma_sq = 0": s.sigma_sq == 0, "exact gradients": s.noise_sq
                           in (None, 0.0), "S = N": s.sampled in (None, s.clients)})
    out["looseness"] = out["bound"] / out["worst_case"] if out["worst_case"] > 0 else math.inf
    if contraction:
        out["rho"] = P.one_round_rate(s, solver=solver)
        out["largest_contracting_step"] = P.largest_contracting_step(s, solver=solver)
    return out


def rho_curve(s: P.Setting, steps, *, solver: str = "clarabel") -> list[float]:
    """The exact one-round contraction ρ(η) at each local step in ``steps``."""
    return [P.one_round_rate(replace(s, lr=float(e)), solver=solver) for e in steps]


def theorem1_exponents(*, lam: float, mu: float, L: float, beta: float, lr: float,
                       R: int, solver: str = "clarabel") -> dict[str, Any]:
    """The worst-case decay per round of pFedMe (exact prox, σ² = 0) against Theorem 1(a)'s
    e^{−η̂₁μ_F T/2}: ρ₀ = the exact one-round contraction of ‖w − w*‖² over S(μ, L)
    (one-round PEP; closed form |1 − β(1 − (1 − ημ_F)^R)|² when μ = L, where every client
    is μ/2‖θ − c‖² and its envelope μ_F/2‖w − c‖²), so F(w^T) − F* ≤ (L_F/μ_F)ρ₀^T(F(w⁰) − F*)
    decays with exponent −ln ρ₀ per round; the bound's exponent is η̂₁μ_F/2.  Returns both
    exponents, their ratio and how ρ₀ was obtained ("PEP" / "closed form" / None when
    PEPit is missing)."""
    mu_f = lam * mu / (lam + mu)
    bound_exp = pfedme.eta_hat_1(lam=lam, mu=mu, beta=beta) * mu_f / 2.0
    if math.isclose(mu, L):
        rho0, how = abs(1.0 - beta * (1.0 - (1.0 - lr * mu_f) ** R)) ** 2, "closed form"
    else:
        from verification.worst_case.pep import PEPUnavailable
        try:
            rho0 = P.one_round_rate(P.Setting(clients=2, rounds=1, local_rounds=R, lr=lr,
                                              lam=lam, beta=beta, mu=mu, L=L), solver=solver)
            how = "PEP"
        except PEPUnavailable:
            return {"bound_exponent": bound_exp, "rho0": None, "how": None}
    exp = -math.log(rho0) if 0 < rho0 < 1 else 0.0
    return {"bound_exponent": bound_exp, "rho0": rho0, "worst_exponent": exp,
            "ratio": exp / bound_exp, "how": how}


def exponent_sentence(e: dict[str, Any]) -> str:
    """One line for a check's detail from :func:`theorem1_exponents`."""
    if e["rho0"] is None:
        return "worst-case exponent not computed (PEPit missing: pip install -e '.[pep]')"
    return (f"worst case over the class ({e['how']}): ρ₀ = {e['rho0']:.6g} per round, exponent "
            f"{e['worst_exponent']:.4g} vs the bound's η̂₁μ_F/2 = {e['bound_exponent']:.4g}: "
            f"the theorem's exponent is {e['ratio']:.3g}× too slow, so bound/measured grows "
            f"along T (a loose upper bound, not a refuted one)")
