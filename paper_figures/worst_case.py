"""Worst cases over the function class (PEP) against the pFedMe and CGPFL theorems (issue 24).

Five PNG + CSV pairs (needs the ``[pep]`` extra):

* ``worst_case_thm1`` — Theorem 1(a) (Dinh, Tran, Nguyen, NeurIPS 2020), F(w̄_T) − F* vs T
  on log scales at the theorem's largest step η = η̂₁/(βR) (β = 128κ_F, λ = 1, μ = 0.5,
  L = 1, R = 2, N = 2, σ² = 1, Δ₀ = 1; the setting of ``pfedme.worst_case_thm1_exact``):
  the bound (hidden constants 1, δ² = 0), the exact PEP worst case for small T, the
  one-round PEP unrolled (valid, not exact) up to 4·T_min (``horizon``), and the engine on
  a quadratic instance; T_min = 2/(η̂₁μ_F) marked;
* ``worst_case_thm2`` — Theorem 2(a), (1/T)Σ‖∇F(w_t)‖² vs T: bound Δ_F/(η̂₂T), exact PEP
  (identical L-smooth clients, λ = 3, L = 1, η = η̂₂), engine on an indefinite quadratic;
* ``worst_case_rho`` — the exact one-round contraction ρ(η) of pFedMe (exact prox, λ = 15,
  μ = 0.1, L = 1, R = 5, β = 1, N = 2) against the local step η, with the theorem's
  admissible η̂₁/(βR) and the largest step with ρ < 1 marked;
* ``worst_case_cgpfl`` — CGPFL Theorem 4.1 (Tang, Guo, Guo, IJCAI 2022) at a fixed
  assignment, (1/T)Σ_t(1/K)‖∇G_K(Ω^t)‖² vs T on log scales: the step-wise bound 4Δ_G/(α̂T),
  the exact PEP worst case (L-smooth non-convex clients, one context of 2, N = 2, R = 2,
  λ = 3, the theorem's largest β), the engine on an indefinite quadratic instance;
* ``worst_case_cgpfl_step`` — the exact constant worst·α̂T/Δ_G (the theorem has 4) against
  β/β_max (T = 2, R = 2): where it crosses 4 the bound stops holding over the class;
  steps without a reliable solve (unbounded, or primal and dual apart near instability)
  are left out (``inf`` in the CSV).
"""

from __future__ import annotations

import pathlib
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from paper_figures._io import write_csv  # noqa: E402
from paper_figures._style import save_figure  # noqa: E402
from pfl_theory import pfedme  # noqa: E402
from verification.worst_case import cgpfl as W  # noqa: E402
from verification.worst_case import instances  # noqa: E402
from verification.worst_case.cgpfl_analysis import bound as cgpfl_bound  # noqa: E402
from verification.worst_case import problems as P  # noqa: E402
from verification.worst_case.analysis import theorem1_setting  # noqa: E402

SIZES = {"quick": {"exact_T": 3, "unrolled": 12, "steps": 10, "thm2_T": 2, "horizon": 4,
                   "cgpfl_T": 3, "cgpfl_steps": 5},
         "full": {"exact_T": 5, "unrolled": 30, "steps": 30, "thm2_T": 4, "horizon": 4,
                  "cgpfl_T": 6, "cgpfl_steps": 12}}
THM1 = {"clients": 2, "local_rounds": 2, "lam": 1.0, "mu": 0.5, "L": 1.0, "sigma_sq": 1.0}


def _save(fig, path: pathlib.Path) -> pathlib.Path:
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def theorem1(out_dir: pathlib.Path, size: dict, seed: int) -> list[pathlib.Path]:
    s = theorem1_setting(THM1)
    t_min = s.rounds
    exact_T = np.arange(1, size["exact_T"] + 1)
    exact = [P.federated(replace(s, rounds=int(T)), "gap_avg").value for T in exact_T]
    rho0 = P.one_round_rate(s)
    rho = rho0 + (1 - rho0) / 2
    c = P.one_round_offset(s, rho)
    long_T = np.unique(np.geomspace(1, size["horizon"] * t_min, size["unrolled"]).astype(int))
    unrolled = [P.unrolled_gap_avg(rho, c, s, int(T)) for T in long_T]
    all_T = np.union1d(exact_T, long_T)
    bound = np.asarray(pfedme.theorem1a(T=all_T, R=s.local_rounds, N=s.clients, beta=s.beta,
                                        lam=s.lam, mu=s.mu, delta_sq=0.0,
                                        sigma_F1_sq=s.sigma_sq, Delta0=s.Delta0,
                                        check_conditions=False).total, dtype=float)
    measured = instances.gap_avg_curve(s, all_T, seed=seed)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(all_T, bound, "k-", label="Theorem 1(a) bound (constants 1)")
    ax.loglog(exact_T, exact, "ro", label="exact PEP worst case")
    ax.loglog(long_T, unrolled, "r--", label="one-round PEP unrolled (valid, not exact)")
    ax.loglog(all_T, measured, "b.-", label="engine, quadratic instance")
    ax.axvline(t_min, color="grey", ls=":", label=f"T_min = {t_min}")
    ax.set(xlabel="rounds T", ylabel="F(w̄_T) − F*",
           title=f"pFedMe Thm 1(a): η = η̂₁/(βR) = {s.lr:.2g}, β = {s.beta:.0f}")
    ax.legend(fontsize=7)
    rows = [(int(T), float(b), float(m),
             exact[list(exact_T).index(T)] if T in exact_T else "",
             unrolled[list(long_T).index(T)] if T in long_T else "")
            for T, b, m in zip(all_T, bound, measured)]
    return [_save(fig, out_dir / "worst_case_thm1.png"),
            write_csv(out_dir / "worst_case_thm1.csv",
                      ("T", "bound", "measured", "pep_exact", "pep_unrolled"), rows)]


def theorem2(out_dir: pathlib.Path, size: dict, seed: int) -> list[pathlib.Path]:
    lam, L = 3.0, 1.0
    eta = pfedme.local_step_bound(eta_hat=pfedme.eta_hat_2(lam=lam, L=L), beta=1.0, R=1)
    s = P.Setting(clients=1, rounds=1, local_rounds=1, lr=eta, lam=lam, mu=None, L=L)
    Ts = np.arange(1, size["thm2_T"] + 1)
    worst = [P.federated(replace(s, rounds=int(T)), "grad_sq_avg").value for T in Ts]
    meas = [instances.measured(replace(s, rounds=int(T), clients=2), "grad_sq_avg", seed=seed)
            for T in Ts]
    bound = [float(pfedme.theorem2a(T=int(T), R=1, N=1, beta=1.0, lam=lam, L=L, delta_sq=0.0,
                                    sigma_F2_sq=0.0, Delta_F=1.0).total) for T in Ts]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(Ts, bound, "k-", label="Theorem 2(a) bound Δ_F/(η̂₂T)")
    ax.loglog(Ts, worst, "ro--", label="PEP worst case (F(w⁰) − F(w_T) ≤ Δ_F)")
    ax.loglog(Ts, meas, "b.-", label="engine, indefinite quadratic")
    ax.set(xlabel="rounds T", ylabel="(1/T) Σ ‖∇F(w_t)‖²",
           title=f"pFedMe Thm 2(a): λ = {lam:g}, L = {L:g}, η = η̂₂ = {eta:.2g}")
    ax.legend(fontsize=7)
    return [_save(fig, out_dir / "worst_case_thm2.png"),
            write_csv(out_dir / "worst_case_thm2.csv", ("T", "bound", "pep", "measured"),
                      zip(Ts.tolist(), bound, worst, meas))]


def rho_vs_step(out_dir: pathlib.Path, size: dict) -> list[pathlib.Path]:
    s = P.Setting(clients=2, rounds=1, local_rounds=5, lr=0.05, lam=15.0, beta=1.0, mu=0.1)
    admissible = pfedme.local_step_bound(
        eta_hat=pfedme.eta_hat_1(lam=s.lam, mu=s.mu, beta=s.beta), beta=s.beta,
        R=s.local_rounds)
    largest = P.largest_contracting_step(s)
    steps = np.geomspace(admissible / 10, 1.5 * largest, size["steps"])
    rhos = [P.one_round_rate(replace(s, lr=float(e))) for e in steps]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogx(steps, rhos, "r.-", label="exact one-round ρ(η) (PEP)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axvline(admissible, color="b", ls=":", label=f"theorem's η̂₁/(βR) = {admissible:.2g}")
    ax.axvline(largest, color="g", ls="--", label=f"largest η with ρ < 1: {largest:.3g}")
    ax.set(xlabel="local step η", ylabel="ρ = worst ‖w¹ − w*‖² / ‖w⁰ − w*‖²",
           ylim=(0, min(2.0, max(rhos) * 1.05)),
           title=f"pFedMe, exact prox: λ = {s.lam:g}, μ = {s.mu}, L = {s.L:g}, "
                 f"R = {s.local_rounds}")
    ax.legend(fontsize=7)
    return [_save(fig, out_dir / "worst_case_rho.png"),
            write_csv(out_dir / "worst_case_rho.csv", ("eta", "rho", "admissible", "largest"),
                      [(float(e), r, admissible, largest) for e, r in zip(steps, rhos)])]


def cgpfl(out_dir: pathlib.Path, size: dict, seed: int) -> list[pathlib.Path]:
    s = W.CGPFLSetting(rounds=1, local_rounds=2, lam=3.0, L=1.0)
    Ts = np.arange(1, size["cgpfl_T"] + 1)
    cases = [replace(s, rounds=int(T)) for T in Ts]
    worst = [W.worst_case(c).value for c in cases]
    meas = [W.measured(c, seed=seed) for c in cases]
    bound = [cgpfl_bound(c) for c in cases]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(Ts, bound, "k-", label="Theorem 4.1 step-wise bound 4Δ_G/(α̂T) (δ = 0)")
    ax.loglog(Ts, worst, "ro--", label="exact PEP worst case (L-smooth clients)")
    ax.loglog(Ts, meas, "b.-", label="engine, indefinite quadratic instance")
    ax.set(xlabel="rounds T", ylabel="(1/T) Σ_t (1/K)‖∇G_K(Ω^t)‖²  at Δ_G = 1",
           title=f"CGPFL Thm 4.1, Q = I: N = {s.N}, R = {s.local_rounds}, λ = {s.lam:g}, "
                 f"β = β_max = {s.beta_max:.3g}")
    ax.legend(fontsize=7)
    return [_save(fig, out_dir / "worst_case_cgpfl.png"),
            write_csv(out_dir / "worst_case_cgpfl.csv", ("T", "bound", "pep", "measured"),
                      zip(Ts.tolist(), bound, worst, meas))]


def cgpfl_step(out_dir: pathlib.Path, size: dict) -> list[pathlib.Path]:
    s = W.CGPFLSetting(rounds=2, local_rounds=2, lam=3.0, L=1.0)
    factors = np.geomspace(0.25, 64.0, size["cgpfl_steps"])
    consts = []
    for f in factors:
        t = replace(s, beta=float(f) * s.beta_max)
        try:
            solved = W.worst_case(t)
            consts.append(solved.value * t.alpha_hat * t.rounds / t.Delta
                          if W.reliable(solved) else float("inf"))
        except Exception:   # unbounded (ArithmeticError) or no solver converged: unstable
            consts.append(float("inf"))
    finite = [c for c in consts if np.isfinite(c)]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogx(factors, [c if np.isfinite(c) else np.nan for c in consts], "r.-",
                label="exact constant worst·α̂T/Δ_G (PEP)")
    ax.axhline(4.0, color="k", lw=0.8, label="the theorem's constant 4")
    ax.axvline(1.0, color="b", ls=":", label="the theorem's β_max")
    ax.set(xlabel="β / β_max", ylabel="worst · α̂T / Δ_G",
           ylim=(0, max(5.0, 1.05 * max(finite, default=5.0))),
           title=f"CGPFL Thm 4.1, Q = I: T = {s.rounds}, R = {s.local_rounds}, N = {s.N}, "
                 f"λ = {s.lam:g}")
    ax.legend(fontsize=7)
    return [_save(fig, out_dir / "worst_case_cgpfl_step.png"),
            write_csv(out_dir / "worst_case_cgpfl_step.csv", ("beta_over_beta_max", "constant"),
                      [(float(f), c) for f, c in zip(factors, consts)])]


def make(out_dir: pathlib.Path, *, quick: bool = False, seed: int = 0) -> list[pathlib.Path]:
    """Write the five figures and their CSVs into ``out_dir``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = SIZES["quick" if quick else "full"]
    return (theorem1(out_dir, size, seed) + theorem2(out_dir, size, seed)
            + rho_vs_step(out_dir, size) + cgpfl(out_dir, size, seed) + cgpfl_step(out_dir, size))
