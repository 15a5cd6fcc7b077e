"""Concrete instances of a :class:`~verification.worst_case.problems.Setting` run by the engine.

The ``measured`` number of a worst-case check: quadratic clients of the setting's class
(:func:`verification.worst_case.quadratic_clients.random_quadratics`) normalised to the
PEP's constraints — ‖w⁰ − w*‖² = Δ₀ and σ²_{F,1} = σ² exactly (the linear terms are
scaled; every quantity at the optimum is linear in them) — run by the engine's
:class:`~algorithms.methods.regularized.pfedme.PFedMe` / :class:`~algorithms.methods.averaging.fedavg.FedAvg` (full batch, S = N; the exact prox by a converged inner solve, :data:`EXACT_FACTOR`),
the metric evaluated with :mod:`pfl_theory.oracle_methods` on the same clients.
"""

from __future__ import annotations

import math

import numpy as np

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import oracle_methods as om
from pfl_theory.oracle_methods import QuadraticOracle
from verification.worst_case import quadratic_clients as qc
from verification.worst_case.problems import Setting, alpha_weights

#: the inner solve's remaining error factor standing in for the exact prox in the engine:
#: with η_p = 2/(2λ + μ + L) it contracts by q = (L − μ)/(2λ + L + μ) per step, and
#: ⌈ln(1e-17)/ln q⌉ steps (at most 60) leave q^K ≤ 1e-17, below float64 rounding
EXACT_FACTOR = 1e-17


def instance(s: Setting, *, dim: int = 4, seed: int = 0) -> tuple[list[QuadraticOracle],
                                                                  np.ndarray, np.ndarray]:
    """``(clients, w*, w⁰)`` for ``s`` (class S(μ, L); ``mu=None``: spectrum in [−L, L],
    identical clients, the homogeneous non-convex case)."""
    rng = np.random.default_rng(seed + 11)
    if s.mu is None:
        base = qc.random_quadratics(1, dim, mu=-s.L, L=s.L, seed=seed)[0]
        clients = [base] * s.clients
        w0 = rng.normal(size=dim)
        return clients, np.zeros(dim), w0
    clients = qc.random_quadratics(s.clients, dim, mu=s.mu, L=s.L, seed=seed)
    if s.sigma_sq == 0:                               # shared minimiser: σ² = 0
        centre = rng.normal(size=dim)
        clients = [QuadraticOracle(c.A, c.A @ centre) for c in clients]
    else:
        lam = s.lam if s.method == "pfedme" else None
        w_star = qc.optimum(clients, lam=lam)
        sig = _sigma_sq(clients, w_star, s)
        clients = [QuadraticOracle(c.A, c.b * np.sqrt(s.sigma_sq / sig)) for c in clients]
    w_star = qc.optimum(clients, lam=s.lam if s.method == "pfedme" else None)
    u = rng.normal(size=dim)
    return clients, w_star, w_star + np.sqrt(s.Delta0) * u / np.linalg.norm(u)


def _sigma_sq(clients, w_star, s: Setting) -> float:
    if s.method == "pfedme":
        grads = [om.envelope_grad(c, w_star, s.lam) for c in clients]
    else:
        grads = [c.grad(w_star) for c in clients]
    return float(np.mean([g @ g for g in grads]))


def algorithm(s: Setting):
    """The engine algorithm of ``s`` (full participation; exact prox → converged inner
    solve, see :data:`EXACT_FACTOR`)."""
    if s.method == "fedavg":
        return FedAvg(lr=s.lr, local_rounds=s.local_rounds, batch_size=2,
                      clients_per_round=s.clients)
    lo = s.mu if s.mu is not None else -s.L
    q = (s.L - lo) / (2 * s.lam + s.L + lo)
    exact_steps = 1 if q <= 0 else min(60, math.ceil(math.log(EXACT_FACTOR) / math.log(q)))
    steps, eta_p = s.inner if s.inner is not None else (exact_steps, 2.0 / (2 * s.lam + lo + s.L))
    return PFedMe(lam=s.lam, lr=s.lr, personal_lr=eta_p, inner_steps=steps,
                  local_rounds=s.local_rounds, batch_size=2, beta=s.beta,
                  clients_per_round=s.clients)


def objective(clients, w, s: Setting) -> float:
    if s.method == "pfedme":
        return float(np.mean([om.envelope_value(c, w, s.lam) for c in clients]))
    return float(np.mean([c.value(w) for c in clients]))


def measured(s: Setting, metric: str, *, rounds: int | None = None, seed: int = 0) -> float:
    """The metric of :func:`verification.worst_case.problems.federated` on the engine's run
    of :func:`instance` for ``rounds`` (default ``s.rounds``) rounds."""
    clients, w_star, w0 = instance(s, seed=seed)
    return metric_on(clients, w_star, w0, s, metric, rounds=rounds)


def metric_on(clients, w_star, w0, s: Setting, metric: str, *,
              rounds: int | None = None) -> float:
    """The metric of the engine's run of ``s`` on ``clients`` from ``w0`` (optimum ``w_star``;
    ignored by ``grad_sq_avg``, which is normalised to F(w⁰) − F(w^T) = Δ_F)."""
    T = s.rounds if rounds is None else rounds
    fed, model = qc.federation(clients)
    ws = qc.engine_trajectory(algorithm(s), fed, model, w0, T)
    if metric == "dist":
        return float(((ws[-1] - w_star) ** 2).sum())
    if metric == "gap_avg":
        a = np.asarray(alpha_weights(T, s.eta_eff, s.mu_F))
        w_bar = (a[:, None] * ws[:-1]).sum(0)
        return objective(clients, w_bar, s) - objective(clients, w_star, s)
    if metric == "grad_sq_avg":
        lam = s.lam
        g = [np.mean([om.envelope_grad(c, w, lam) for c in clients], 0) for w in ws[:-1]]
        drop = objective(clients, ws[0], s) - objective(clients, ws[-1], s)
        return float(np.mean([x @ x for x in g])) * s.Delta0 / drop
    raise ValueError(f"unknown metric {metric!r}")


def gap_avg_curve(s: Setting, rounds, *, seed: int = 0) -> np.ndarray:
    """F(w̄_T) − F* of one engine run of :func:`instance` at every T in ``rounds``."""
    rounds = [int(T) for T in rounds]
    clients, w_star, w0 = instance(s, seed=seed)
    fed, model = qc.federation(clients)
    ws = qc.engine_trajectory(algorithm(s), fed, model, w0, max(rounds))
    f_star = objective(clients, w_star, s)
    out = []
    for T in rounds:
        a = np.asarray(alpha_weights(T, s.eta_eff, s.mu_F))
        out.append(objective(clients, (a[:, None] * ws[:T]).sum(0), s) - f_star)
    return np.asarray(out)
