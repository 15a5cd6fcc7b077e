"""CGPFL Theorem 4.1 with a fixed assignment: the exact worst case over the class (PEP).

With the assignment fixed (P^t constant, Q^t = I) and the personalized problems solved
exactly (δ = 0), CGPFL (IJCAI 2022, Algorithm 1; :func:`pfl_theory.oracle_methods.cgpfl_round`)
is, per context, a local-step method on G_k = (c/λ)·mean_{i∈C_k} F_i (F_i the Moreau
envelope of f_i, c = 2/N the paper's local scale) and Theorem 4.1's step-wise inequality
(ICLR appendix A.3) reads, the B₁, B₂ terms being zero at Q = I,

    (1/T)Σ_{t<T} (1/K)‖∇G_K(Ω^t)‖² ≤ 4Δ_G/(α̂T),   α̂ = Rαβ,
    Δ_G = (1/K)Σ_k [G_k(ω_k^0) − G_k(ω_k^T)]

(:func:`pfl_theory.cgpfl.theorem41_fixed_assignment`).  The PEP computes the largest
left-hand side over every f_i of the class of Assumption 1 (L-smooth, non-convex by
default; ``mu`` gives S(μ, L)) at Δ_G ≤ Δ, sizes fixed.  Contexts share no client, so the
worst case of the mean over K contexts is that of one context (the value is linear in Δ:
x ↦ s·x, f ↦ s²f(·/s) maps the class to itself); ``contexts=2`` is tested equal to 1.

Constants: L_G = (c/λ)·L_F with pFedMe's Proposition 1 L_F = λ (valid for non-convex f
when λ ≥ 2L: the exact λL/(λ − L) is then ≤ λ), so L_G = c = 2/N; β the theorem's largest,
min(1/(2√(R(R+1))L_G), 1/(√416·R·L_G)) (the stated condition and the proof's
β²L_G² ≤ 1/(416R²)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pfl_theory import oracle_methods as om
from verification.worst_case import pep as pep_module
from verification.worst_case.pep import PEPClient, Solved, solve


@dataclass(frozen=True)
class CGPFLSetting:
    """K = ``contexts`` contexts of ``per_context`` clients each (N = K·per_context unless
    ``n_total`` sets the N of c = 2/N); T, R, λ, α; the class (``mu=None``: L-smooth
    non-convex); β (None: the theorem's largest); Δ (the budget of Δ_G)."""

    contexts: int = 1
    per_context: int = 2
    n_total: int | None = None
    rounds: int = 3
    local_rounds: int = 2
    lam: float = 3.0
    L: float = 1.0
    mu: float | None = None
    alpha: float = 1.0
    beta: float | None = None
    Delta: float = 1.0

    def __post_init__(self):
        for name in ("contexts", "per_context", "rounds", "local_rounds"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_total is not None and self.n_total < self.contexts * self.per_context:
            raise ValueError(f"n_total must be >= K·|C_k| = {self.contexts * self.per_context}")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if not (self.L > 0 and self.Delta > 0):
            raise ValueError("L and Delta must be positive")
        if self.mu is None and self.lam < 2 * self.L:
            raise ValueError(f"non-convex clients need lam >= 2L = {2 * self.L} (L_F = λ, "
                             f"Proposition 1), got lam={self.lam}")
        if self.mu is not None and not 0 <= self.mu <= self.L:
            raise ValueError(f"need 0 <= mu <= L, got mu={self.mu}, L={self.L}")
        if self.beta is not None and self.beta <= 0:
            raise ValueError(f"beta must be positive, got {self.beta}")

    @property
    def N(self) -> int:
        return self.n_total or self.contexts * self.per_context

    @property
    def scale(self) -> float:
        """The paper's c = 2/N of ∇_{ω_i}G = (2/N)(ω̃_i − θ̃_i)."""
        return 2.0 / self.N

    @property
    def L_G(self) -> float:
        """(c/λ)·L_F with L_F = λ (Proposition 1): c."""
        return self.scale

    @property
    def beta_max(self) -> float:
        R = self.local_rounds
        return min(1.0 / (2.0 * math.sqrt(R * (R + 1)) * self.L_G),
                   1.0 / (math.sqrt(416.0) * R * self.L_G))

    @property
    def step(self) -> float:
        return self.beta_max if self.beta is None else self.beta

    @property
    def alpha_hat(self) -> float:
        """α̂ = Rαβ."""
        return self.local_rounds * self.alpha * self.step

    @property
    def assignment(self) -> list[int]:
        return [i // self.per_context for i in range(self.contexts * self.per_context)]


def trajectory(clients, omega0, s: CGPFLSetting) -> list[list]:
    """Ω^0 … Ω^T of the oracle form (numbers or PEPit points)."""
    traj = [list(omega0)]
    for _ in range(s.rounds):
        traj.append(om.cgpfl_round(clients, traj[-1], s.assignment, lam=s.lam, lr=s.step,
                                   scale=s.scale, local_rounds=s.local_rounds, alpha=s.alpha))
    return traj


def G_value(clients, omegas, s: CGPFLSetting):
    """(1/K)Σ_k G_k(ω_k)."""
    return om.average([om.cgpfl_context_value(clients, s.assignment, k, w, lam=s.lam,
                                              scale=s.scale) for k, w in enumerate(omegas)])


def grad_sq(clients, omegas, s: CGPFLSetting, sq_norm):
    """(1/K)‖∇G_K(Ω)‖² = (1/K)Σ_k‖∇G_k(ω_k)‖²."""
    return om.average([sq_norm(om.cgpfl_context_grad(clients, s.assignment, k, w,
                                                     lam=s.lam, scale=s.scale))
                       for k, w in enumerate(omegas)])


#: largest relative primal–dual gap of a solve whose value is used in a step scan.  Beyond
#: β_max Clarabel fails and SCS answers 'optimal_inaccurate'; in a scan of T = 2, R = 2 its
#: values were smooth (1.02 … 1.08·Δ_G/(α̂T) for β/β_max = 2 … 6) with gaps ≤ 9e-5, except
#: at β/β_max = 4 (×2 off its neighbours, gap 1.8e-4) and 8 (gap 2e3): hence 1e-4
GAP_TOL = 1e-4


def reliable(solved: Solved) -> bool:
    """Primal and dual values agree to :data:`GAP_TOL` (relative, at least absolute 1e-4)."""
    return abs(solved.primal - solved.value) <= GAP_TOL * max(abs(solved.value), 1.0)


def worst_case(s: CGPFLSetting, *, solver: str = "clarabel", reduce_dimension: bool = False,
               fallback: bool = True) -> Solved:
    """The largest (1/T)Σ_{t<T}(1/K)‖∇G_K(Ω^t)‖² over the class at Δ_G ≤ Δ (Clarabel;
    with ``fallback`` SCS where Clarabel fails, said in the status; :func:`reliable` says
    whether the value can be used)."""
    PEPit = pep_module.require_pepit()
    from PEPit.functions import SmoothFunction, SmoothStronglyConvexFunction

    pep = PEPit.PEP()
    n = s.contexts * s.per_context
    if s.mu is None:
        fns = [pep.declare_function(SmoothFunction, L=s.L) for _ in range(n)]
    else:
        fns = [pep.declare_function(SmoothStronglyConvexFunction, mu=s.mu, L=s.L)
               for _ in range(n)]
    clients = [PEPClient(f) for f in fns]
    omega0 = [pep.set_initial_point() for _ in range(s.contexts)]
    traj = trajectory(clients, omega0, s)
    pep.set_initial_condition(G_value(clients, traj[0], s) - G_value(clients, traj[-1], s)
                              <= s.Delta)
    pep.set_performance_metric(om.average([grad_sq(clients, om_t, s, PEPClient.sq_norm)
                                           for om_t in traj[:-1]]))
    solved = solve(pep, solver=solver, reduce_dimension=reduce_dimension, fallback=fallback)
    solved.handles = {"functions": fns, "omega0": omega0}
    return solved


def metric_of(clients, traj, s: CGPFLSetting) -> tuple[float, float]:
    """(metric, Δ_G) of a numeric trajectory."""
    sq = om.QuadraticOracle.sq_norm
    metric = float(np.mean([grad_sq(clients, om_t, s, sq) for om_t in traj[:-1]]))
    drop = float(G_value(clients, traj[0], s) - G_value(clients, traj[-1], s))
    return metric, drop


# ------------------------------------------------------------------ the engine's instance
def instance(s: CGPFLSetting, *, dim: int = 4, seed: int = 0):
    """``(clients, Ω⁰)``: quadratic clients of the class (spectrum in [−L, L], or [μ, L]),
    context models 50 apart so that the engine's k-means keeps the assignment."""
    from verification.worst_case import quadratic_clients as qc

    lo = -s.L if s.mu is None else s.mu
    clients = qc.random_quadratics(s.contexts * s.per_context, dim, mu=lo, L=s.L, seed=seed)
    rng = np.random.default_rng(seed + 7)
    omega0 = [rng.normal(size=dim) + 50.0 * k * np.eye(dim)[0] for k in range(s.contexts)]
    return clients, omega0


def engine_algorithm(s: CGPFLSetting):
    """The engine's CGPFL for ``s``: c = 2/N (``local_scale``), the exact prox by a
    converged inner solve (contraction q = (L − lo)/(2λ + L + lo) per step to q^S ≤ 1e-17)."""
    from algorithms.methods.clustered.cgpfl import CGPFL

    lo = -s.L if s.mu is None else s.mu
    q = (s.L - lo) / (2 * s.lam + s.L + lo)
    steps = 1 if q <= 0 else min(60, math.ceil(math.log(1e-17) / math.log(q)))
    return CGPFL(num_contexts=s.contexts, lam=s.lam, personal_lr=2.0 / (2 * s.lam + lo + s.L),
                 inner_steps=steps, lr=s.step, local_scale=s.scale, alpha=s.alpha,
                 local_rounds=s.local_rounds, batch_size=2, kmeans_restarts=1)


def engine_trajectory(s: CGPFLSetting, clients, omega0, *, seed: int = 0) -> list[list]:
    """Ω^0 … Ω^T of the batched engine from ``omega0`` with the assignment of ``s``;
    raises if the engine's clustering ever leaves it (Q^t ≠ I)."""
    import torch

    from algorithms.engine.base import State
    from verification.worst_case import quadratic_clients as qc

    fed, model = qc.federation(clients)
    alg = engine_algorithm(s)
    state = alg.init(fed, model, seed)
    labels = torch.tensor(s.assignment)
    ctx = {"theta": torch.as_tensor(np.stack(omega0), dtype=torch.float64)}
    state = State(0, seed, {**state.models, "context": ctx},
                  {**state.tensors, "assignment": labels})
    traj = [list(omega0)]
    for t in range(s.rounds):
        state = alg.round(state, fed, model)
        if not torch.equal(state.tensors["assignment"], labels):
            raise RuntimeError(f"the engine's clustering changed the assignment in round {t}")
        traj.append(list(state.models["context"]["theta"].numpy().copy()))
    return traj


def measured(s: CGPFLSetting, *, seed: int = 0) -> float:
    """The engine's metric on :func:`instance`, normalised to Δ_G = Δ (metric/Δ_G is
    invariant under the class's scaling x ↦ s·x, f ↦ s²f(·/s))."""
    clients, omega0 = instance(s, seed=seed)
    metric, drop = metric_of(clients, engine_trajectory(s, clients, omega0, seed=seed), s)
    if not drop > 0:
        raise ArithmeticError(f"Δ_G = {drop:.3g} <= 0 on the instance: nothing to normalise")
    return metric * s.Delta / drop


def replay(data: dict, s: CGPFLSetting) -> float:
    """The engine's normalised metric on an extracted quadratic worst-case instance
    (:func:`verification.worst_case.counterexample.extract`; rank < 2 is embedded in ℝ²)."""
    if not data["quadratic"]:
        raise ValueError("the worst case is not a quadratic instance: nothing to replay")
    r = data["rank"]
    d = max(r, 2)
    lo = -s.L if s.mu is None else s.mu
    clients = []
    for c in data["clients"]:
        A = np.zeros((d, d))
        A[:r, :r] = np.asarray(c["A"])
        A[r:, r:] = np.eye(d - r) * max(lo, 0.0)
        clients.append(om.QuadraticOracle(A, np.concatenate([c["b"], np.zeros(d - r)])))
    omega0 = [np.concatenate([w, np.zeros(d - r)]) for w in data["omega0"]]
    metric, drop = metric_of(clients, engine_trajectory(s, clients, omega0), s)
    return metric * s.Delta / drop
