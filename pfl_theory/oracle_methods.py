"""Optimization methods of the papers written once over a first-order oracle.

The same functions run on concrete clients (:class:`QuadraticOracle`, numpy float64) and
on the symbolic points of a performance-estimation problem (the PEPit adapter in
:mod:`verification.worst_case.pep_oracle`): a method only adds and subtracts vectors,
multiplies them by numbers and calls its clients' oracles, so whatever it computes on
numbers it also states, unchanged, about a whole function class.  A test runs the concrete
form against the batched engine (:mod:`algorithms.methods.regularized.pfedme`, :mod:`algorithms.methods.averaging.fedavg`) in
float64 (tests/pfl_theory/test_oracle_methods.py): the worst cases analyse what the engine
runs.

Oracle interface (duck-typed): ``grad(x)`` = ∇f(x); ``prox(x, step)`` =
argmin_θ f(θ) + ‖θ − x‖²/(2·step); ``value(x)`` = f(x); ``sq_norm(v)`` = ‖v‖² in the
oracle's space.  Vectors support ``+``, ``−``, multiplication by a float (on the left) and
nothing else.

Methods (paper, equation; the readings are those of docs/formulas.md):

* Moreau envelope (pFedMe, Dinh, Tran, Nguyen, NeurIPS 2020, eq. 3 and Proposition 1 /
  eq. 6): θ̂(w) = prox_{f/λ}(w), F(w) = f(θ̂) + λ/2‖θ̂ − w‖², ∇F(w) = λ(w − θ̂);
* pFedMe's inexact inner solve (eq. 7, Algorithm 1): K gradient steps on
  f(θ) + λ/2‖θ − w‖² from a warm start, step η_p;
* pFedMe's local rounds and server step (Algorithm 1): w_{r+1} = w_r − ηλ(w_r − θ̃(w_r)),
  then w⁺ = (1 − β)w + β·mean_i w_{i,R} (full participation, uniform mean);
* FedAvg (McMahan et al., AISTATS 2017) with R local gradient steps and the uniform mean
  (the engine's sample-weighted mean equals it with equal client sizes);
* Per-FedAvg's first-order local step (Fallah, Mokhtari, Ozdaglar, NeurIPS 2020, Algorithm
  1, FO): w̃ = w − α∇f(w), w ← w − β∇f(w̃);
* CGPFL with a fixed assignment (Tang, Guo, Guo, IJCAI 2022, Algorithm 1, docs/formulas.md
  §A.5; P^t constant, so Q^t = I): client i in context k runs R local steps
  ω̃ ← ω̃ − β·c·(ω̃ − θ̃_i(ω̃)) with the exact personalized solution θ̃_i = prox_{f_i/λ}
  (the paper's c = 2/N: h = ∇_{ω_i}G), then ω_k⁺ = (1 − α)ω_k + α·mean_{i∈C_k} ω̃_{i,R}
  (step 4).  The generalized model's gradient in the proof's reading (ICLR appendix A.3,
  Ω^{t+1} = Ω^t − α̂H_IP at Q = I): ∇G_k(ω_k) = mean_{i∈C_k} c(ω_k − θ̂_i(ω_k)); with the
  exact prox this is the gradient of G_k = (c/λ)·mean_{i∈C_k} F_i (F_i the Moreau envelope
  with parameter λ, pFedMe eq. 6), the value used for Δ_G.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["QuadraticOracle", "average", "envelope_prox", "envelope_grad", "envelope_value",
           "inexact_prox", "pfedme_local", "pfedme_round", "fedavg_local", "fedavg_round",
           "perfedavg_fo_local", "perfedavg_fo_round", "cgpfl_local", "cgpfl_round",
           "cgpfl_context_grad", "cgpfl_context_value"]


@dataclass(frozen=True)
class QuadraticOracle:
    """``f(θ) = ½θᵀAθ − bᵀθ + c`` (``A`` symmetric positive semidefinite ``[d, d]``,
    ``b`` ``[d]``) in float64, with the exact prox ``(A + I/s)⁻¹(b + x/s)``."""

    A: np.ndarray
    b: np.ndarray
    c: float = 0.0

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.A @ x - self.b

    def prox(self, x: np.ndarray, step: float) -> np.ndarray:
        d = self.b.shape[0]
        return np.linalg.solve(self.A + np.eye(d) / step, self.b + x / step)

    def value(self, x: np.ndarray) -> float:
        return float(0.5 * x @ self.A @ x - self.b @ x + self.c)

    @staticmethod
    def sq_norm(v: np.ndarray) -> float:
        return float(v @ v)


def average(vectors: Sequence[Any]) -> Any:
    """Uniform mean of ``vectors`` using only ``+`` and scalar ``*``."""
    if not vectors:
        raise ValueError("average of no vectors")
    total = vectors[0]
    for v in vectors[1:]:
        total = total + v
    return (1.0 / len(vectors)) * total


# ----------------------------------------------------------------------- Moreau envelope
def envelope_prox(f: Any, w: Any, lam: float) -> Any:
    """θ̂(w) = prox_{f/λ}(w) = argmin_θ f(θ) + λ/2‖θ − w‖² (pFedMe eq. 3)."""
    return f.prox(w, 1.0 / lam)


def envelope_grad(f: Any, w: Any, lam: float) -> Any:
    """∇F(w) = λ(w − θ̂(w)) (pFedMe eq. 6 / Proposition 1)."""
    return lam * (w - envelope_prox(f, w, lam))


def envelope_value(f: Any, w: Any, lam: float) -> Any:
    """F(w) = f(θ̂) + λ/2‖θ̂ − w‖² (the Moreau envelope, pFedMe eq. 3)."""
    theta = envelope_prox(f, w, lam)
    return f.value(theta) + (lam / 2.0) * f.sq_norm(theta - w)


def inexact_prox(f: Any, w: Any, theta: Any, *, lam: float, personal_lr: float,
                 steps: int) -> Any:
    """``steps`` gradient steps θ ← θ − η_p(∇f(θ) + λ(θ − w)) on the inner problem of
    pFedMe eq. 7 from the warm start ``theta`` (full batch)."""
    for _ in range(steps):
        theta = theta - personal_lr * (f.grad(theta) + lam * (theta - w))
    return theta


# ------------------------------------------------------------------------------- pFedMe
def pfedme_local(f: Any, w: Any, *, lam: float, lr: float, local_rounds: int,
                 inner: tuple[int, float] | None = None) -> tuple[Any, Any]:
    """One client's part of a pFedMe round (Algorithm 1): returns ``(θ̃, w_{i,R})``.

    ``inner=None``: the exact prox; ``inner=(K, η_p)``: K gradient steps warm-started from
    the previous θ̃ (the first from w, as the engine and the public code do)."""
    w_loc, theta = w, w
    for _ in range(local_rounds):
        if inner is None:
            theta = envelope_prox(f, w_loc, lam)
        else:
            theta = inexact_prox(f, w_loc, theta, lam=lam, personal_lr=inner[1],
                                 steps=inner[0])
        w_loc = w_loc - (lr * lam) * (w_loc - theta)
    return theta, w_loc


def pfedme_round(clients: Sequence[Any], w: Any, *, lam: float, lr: float, local_rounds: int,
                 beta: float, inner: tuple[int, float] | None = None) -> Any:
    """w⁺ = (1 − β)w + β·mean_i w_{i,R} with every client training (S = N)."""
    ends = [pfedme_local(f, w, lam=lam, lr=lr, local_rounds=local_rounds, inner=inner)[1]
            for f in clients]
    return (1.0 - beta) * w + beta * average(ends)


# ------------------------------------------------------------------------------ FedAvg
def fedavg_local(f: Any, w: Any, *, lr: float, local_steps: int) -> Any:
    """R full-batch gradient steps w ← w − η∇f(w)."""
    for _ in range(local_steps):
        w = w - lr * f.grad(w)
    return w


def fedavg_round(clients: Sequence[Any], w: Any, *, lr: float, local_steps: int) -> Any:
    """FedAvg round with every client, uniform mean of the local models."""
    return average([fedavg_local(f, w, lr=lr, local_steps=local_steps) for f in clients])


# -------------------------------------------------------------------- Per-FedAvg (FO)
def perfedavg_fo_local(f: Any, w: Any, *, alpha: float, beta: float, local_steps: int) -> Any:
    """Per-FedAvg first-order local steps: w̃ = w − α∇f(w), w ← w − β∇f(w̃)."""
    for _ in range(local_steps):
        w = w - beta * f.grad(w - alpha * f.grad(w))
    return w


def perfedavg_fo_round(clients: Sequence[Any], w: Any, *, alpha: float, beta: float,
                       local_steps: int) -> Any:
    """Per-FedAvg (FO) round with every client, uniform mean."""
    return average([perfedavg_fo_local(f, w, alpha=alpha, beta=beta, local_steps=local_steps)
                    for f in clients])


# ------------------------------------------------------------- CGPFL, fixed assignment
def cgpfl_local(f: Any, omega: Any, *, lam: float, lr: float, scale: float,
                local_rounds: int) -> Any:
    """One client's step 2 of CGPFL (Algorithm 1) with the exact personalized solution:
    R steps ω̃ ← ω̃ − β·c·(ω̃ − prox_{f/λ}(ω̃)); returns ω̃_{i,R}."""
    for _ in range(local_rounds):
        omega = omega - (lr * scale) * (omega - envelope_prox(f, omega, lam))
    return omega


def cgpfl_round(clients: Sequence[Any], contexts: Sequence[Any], assignment: Sequence[int], *,
                lam: float, lr: float, scale: float, local_rounds: int,
                alpha: float) -> list[Any]:
    """Ω^{t+1} with the fixed assignment k(i) = ``assignment[i]`` (every context non-empty):
    ω_k⁺ = (1 − α)ω_k + α·mean_{i∈C_k} ω̃_{i,R} (CGPFL step 4, Q^t = I)."""
    out = []
    for k, omega in enumerate(contexts):
        ends = [cgpfl_local(f, omega, lam=lam, lr=lr, scale=scale, local_rounds=local_rounds)
                for f, a in zip(clients, assignment) if a == k]
        out.append((1.0 - alpha) * omega + alpha * average(ends))
    return out


def _members(clients: Sequence[Any], assignment: Sequence[int], k: int) -> list[Any]:
    members = [f for f, a in zip(clients, assignment) if a == k]
    if not members:
        raise ValueError(f"context {k} has no client")
    return members


def cgpfl_context_grad(clients: Sequence[Any], assignment: Sequence[int], k: int, omega: Any,
                       *, lam: float, scale: float) -> Any:
    """∇G_k(ω_k) = mean_{i∈C_k} c(ω_k − θ̂_i(ω_k)) (the proof's H_IP at Q = I)."""
    return average([scale * (omega - envelope_prox(f, omega, lam))
                    for f in _members(clients, assignment, k)])


def cgpfl_context_value(clients: Sequence[Any], assignment: Sequence[int], k: int, omega: Any,
                        *, lam: float, scale: float) -> Any:
    """G_k(ω_k) = (c/λ)·mean_{i∈C_k} F_i(ω_k), whose gradient is :func:`cgpfl_context_grad`."""
    return (scale / lam) * average([envelope_value(f, omega, lam)
                                    for f in _members(clients, assignment, k)])
