"""pFedMe Theorem 2(a) with heterogeneous clients: the diversity assumption imposed where the
method evaluates it (a relaxation: a valid upper bound of the worst case).

Assumption 3 (pFedMe, Dinh, Tran, Nguyen, NeurIPS 2020; docs/formulas.md §B.2) bounds the
envelopes' diversity (1/N)Σ‖∇F_i(w) − ∇F(w)‖² ≤ σ²_{F,2} at *every* w; a PEP can impose it
only at points it visits — here the global models w^0 … w^{T−1}, where every client's
∇F_i is evaluated for the metric.  Fewer constraints allow more functions, so the value is
an upper bound of the worst case over the theorem's class (``exact=False`` in the verdict),
and with the initial condition F(w⁰) − F(w_T) ≤ Δ_F (F(w_T) ≥ F*) relaxed as in the
homogeneous check.  The engine's instance: indefinite quadratic clients sharing one Hessian
(their envelopes then differ by constant gradients, so the diversity is the same at every w
and A3 holds globally), normalised to F(w⁰) − F(w_T) = Δ_F; its σ²_{F,2} after that scaling
is the σ² of the PEP and of the bound.
"""

from __future__ import annotations

import numpy as np

from pfl_theory import oracle_methods as om
from verification.worst_case import pep as pep_module
from verification.worst_case import problems as P
from verification.worst_case.pep import PEPClient, Solved, solve


def worst_case(s: P.Setting, *, solver: str = "clarabel") -> Solved:
    """Largest (1/T)Σ_{t<T}‖∇F(w^t)‖² over N L-smooth clients with the diversity ≤ ``s.sigma_sq``
    at every w^t and F(w⁰) − F(w_T) ≤ ``s.Delta0``."""
    if s.mu is not None or s.method != "pfedme":
        raise ValueError("the heterogeneous Theorem 2 PEP is pFedMe over L-smooth clients")
    PEPit = pep_module.require_pepit()
    from PEPit.functions import SmoothFunction

    pep = PEPit.PEP()
    clients = [PEPClient(pep.declare_function(SmoothFunction, L=s.L)) for _ in range(s.clients)]
    ws = [pep.set_initial_point()]
    for _ in range(s.rounds):
        ws.append(P._round(clients, ws[-1], s))
    pep.set_initial_condition(P.objective(clients, ws[0], s) - P.objective(clients, ws[-1], s)
                              <= s.Delta0)
    squares = []
    for w in ws[:-1]:
        grads = [om.envelope_grad(c, w, s.lam) for c in clients]
        mean = om.average(grads)
        pep.add_constraint(om.average([(g - mean) ** 2 for g in grads]) <= s.sigma_sq)
        squares.append(mean ** 2)
    pep.set_performance_metric(om.average(squares))
    return solve(pep, solver=solver)


def instance(s: P.Setting, *, dim: int = 4, seed: int = 0, spread: float = 1.0):
    """``(clients, w⁰)``: one indefinite Hessian (spectrum [−L, L]) shared by every client,
    linear terms b_i = b̄ + spread·u_i."""
    from verification.worst_case import quadratic_clients as qc

    base = qc.random_quadratics(1, dim, mu=-s.L, L=s.L, seed=seed)[0]
    rng = np.random.default_rng(seed + 3)
    clients = [om.QuadraticOracle(base.A, base.b + spread * rng.normal(size=dim))
               for _ in range(s.clients)]
    return clients, rng.normal(size=dim)


def diversity(clients, w, lam: float) -> float:
    """(1/N)Σ‖∇F_i(w) − ∇F(w)‖² (constant in w for clients sharing one Hessian)."""
    grads = [om.envelope_grad(c, w, lam) for c in clients]
    mean = np.mean(grads, axis=0)
    return float(np.mean([(g - mean) @ (g - mean) for g in grads]))


def measured(s: P.Setting, *, seed: int = 0, spread: float = 1.0) -> tuple[float, float]:
    """``(metric, σ²)`` of the engine on :func:`instance`, both after the scaling that makes
    F(w⁰) − F(w_T) = Δ_F (x ↦ c·x, f ↦ c²f(·/c): gradients ×c, values ×c²)."""
    from verification.worst_case import instances
    from verification.worst_case import quadratic_clients as qc

    clients, w0 = instance(s, seed=seed, spread=spread)
    fed, model = qc.federation(clients)
    ws = qc.engine_trajectory(instances.algorithm(s), fed, model, w0, s.rounds)
    grads = [np.mean([om.envelope_grad(c, w, s.lam) for c in clients], 0) for w in ws[:-1]]
    drop = instances.objective(clients, ws[0], s) - instances.objective(clients, ws[-1], s)
    if not drop > 0:
        raise ArithmeticError(f"F(w0) - F(w_T) = {drop:.3g} <= 0 on the instance")
    scale = s.Delta0 / drop
    return (float(np.mean([g @ g for g in grads])) * scale,
            diversity(clients, ws[0], s.lam) * scale)
