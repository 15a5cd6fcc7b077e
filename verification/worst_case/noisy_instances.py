"""The engine on stochastic instances: the ``measured`` side of the stochastic worst cases.

A client's training rows carry ``(A_i, b_i + z_j)`` (:class:`~verification.worst_case.
quadratic_clients.FixedQuadratic`), with noise vectors z_j in ± pairs scaled so that
mean_j ‖z_j‖² = γ_f² exactly: the full-batch loss is still f_i, a sample's gradient is
∇f_i(θ) − z_j — unbiased with variance exactly γ_f² at every θ (pFedMe A2), and a
mini-batch of |D| drawn uniformly with replacement (the engine's
``Federation.sample_batches``) has variance γ_f²/|D|.  The engine samples S of N clients
uniformly without replacement.  The metric's expectation over the engine's randomness is
estimated by many seeds on one instance: mean ± standard error.

pFedMe's "exact" prox is the converged inner solve of the *mini-batch* problem h̃(θ; D)
(eq. 7 with ν ≈ 0), so ∇h(θ̃) = z̄_D and E‖∇h(θ̃)‖² = γ_f²/|D| ≤ 2γ_f²/|D| (Lemma 1's
proof): the run lies in the class of the PEP (:mod:`verification.worst_case.stochastic`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from pfl_theory import oracle_methods as om
from verification.worst_case import instances
from verification.worst_case import quadratic_clients as qc
from verification.worst_case.problems import Setting, alpha_weights


def noisy_federation(clients, noise_sq: float, *, samples: int = 8, seed: int = 0):
    """:func:`quadratic_clients.federation` with the training rows' linear terms b_i + z_j
    (``samples`` rows per client, ± pairs, mean ‖z‖² = ``noise_sq``)."""
    if samples % 2:
        raise ValueError(f"samples must be even (± pairs), got {samples}")
    fed, model = qc.federation(clients, samples=samples)
    d = clients[0].b.shape[0]
    rng = np.random.default_rng(seed + 101)
    split = fed.train
    for i, c in enumerate(clients):
        n = int(split.counts[i])
        half = rng.normal(size=(n // 2, d))
        z = np.concatenate([half, -half])
        z *= math.sqrt(noise_sq / float(np.mean((z ** 2).sum(1)))) if noise_sq > 0 else 0.0
        rows = np.concatenate([np.tile(c.A.ravel(), (n, 1)), c.b[None] + z], 1)
        start = int(split.offsets[i])
        split.x[start:start + n] = torch.as_tensor(rows, dtype=split.x.dtype).reshape(
            split.x[start:start + n].shape)
    return fed, model


def engine_algorithm(s: Setting):
    """The engine algorithm of ``s`` with its mini-batch |D| and S sampled clients."""
    alg = instances.algorithm(s)
    return replace(alg, batch_size=s.batch_size,
                   clients_per_round=s.clients if s.sampled is None else s.sampled)


def trajectories(s: Setting, clients, w0, seeds) -> list[np.ndarray]:
    """The engine's global models ``[T + 1, d]`` on the noisy instance, one per seed."""
    fed, model = noisy_federation(clients, s.noise_sq or 0.0)
    alg = engine_algorithm(s)
    return [qc.engine_trajectory(alg, fed, model, w0, s.rounds, seed=int(k)) for k in seeds]


def metric(clients, w_star, ws: np.ndarray, s: Setting, name: str) -> float:
    """One run's metric (the PEP's, unnormalised): ``dist`` ‖w^T − w*‖², ``gap_avg``
    F(w̄_T) − F* (Theorem 1's α-average), ``gap_mean`` F(mean_{t≥1} w^t) − F*,
    ``grad_sq_avg`` (1/T)Σ_{t<T}‖∇F(w^t)‖²."""
    if name == "dist":
        return float(((ws[-1] - w_star) ** 2).sum())
    if name == "grad_sq_avg":
        grads = [np.mean([om.envelope_grad(c, w, s.lam) for c in clients], 0)
                 for w in ws[:-1]]
        return float(np.mean([g @ g for g in grads]))
    if name == "gap_avg":
        a = np.asarray(alpha_weights(s.rounds, s.eta_eff, s.mu_F))
        w = (a[:, None] * ws[:-1]).sum(0)
    elif name == "gap_mean":
        w = ws[1:].mean(0)
    else:
        raise ValueError(f"unknown metric {name!r}")
    return instances.objective(clients, w, s) - instances.objective(clients, w_star, s)


def stats(values) -> tuple[float, float]:
    """(mean, standard error) of per-seed values."""
    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se


def measured(s: Setting, name: str, *, seeds=range(16), clients=None, w_star=None,
             w0=None) -> tuple[float, float]:
    """Mean ± standard error of the metric over the engine's seeds on one instance
    (default: :func:`instances.instance`, normalised to Δ₀ and σ²)."""
    if clients is None:
        clients, w_star, w0 = instances.instance(s)
    runs = trajectories(s, clients, w0, seeds)
    return stats([metric(clients, w_star, ws, s, name) for ws in runs])


def convex_instance(s: Setting, *, dim: int = 4, seed: int = 0):
    """``(clients, w*, w⁰)`` for the L-smooth (Theorem 2) PEP with noise: identical convex
    clients (spectrum in [0.1L, L], b = 0: w* = 0, F* = 0 — members of the L-smooth class),
    w⁰ scaled so that F(w⁰) − F* = Δ_F (Theorem 2's hypothesis; then also
    F(w⁰) − E F(w_T) ≤ Δ_F, the PEP's relaxed condition, since F(w_T) ≥ F*)."""
    base = qc.random_quadratics(1, dim, mu=0.1 * s.L, L=s.L, seed=seed)[0]
    base = om.QuadraticOracle(base.A, np.zeros(dim))
    clients = [base] * s.clients
    u = np.random.default_rng(seed + 11).normal(size=dim)
    gap = instances.objective(clients, u, s) - instances.objective(clients, 0 * u, s)
    return clients, np.zeros(dim), u * math.sqrt(s.Delta0 / gap)


def measured_for(s: Setting, name: str, *, seeds=range(16)) -> tuple[float, float]:
    """The engine's value beside a worst case: deterministic settings one run
    (:func:`instances.measured`, se 0), stochastic ones mean ± se over ``seeds``."""
    if not s.stochastic:
        return instances.measured(s, name, seed=0), 0.0
    if name == "grad_sq_avg":
        clients, w_star, w0 = convex_instance(s)
        return measured(s, name, seeds=seeds, clients=clients, w_star=w_star, w0=w0)
    return measured(s, name, seeds=seeds)
