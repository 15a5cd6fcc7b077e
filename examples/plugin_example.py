"""A plugin: one algorithm and one bound check of your own, outside the package.

Load it with ``pflt --plugin examples/plugin_example.py …`` or
``PFLT_PLUGINS=examples/plugin_example.py``; docs/extending.md explains every line.

* ``my-fedprox`` — FedProx-style local training: R SGD steps on the local loss plus the
  proximal term (μ/2)‖w − w^t‖² (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, *Federated
  Optimization in Heterogeneous Networks*, MLSys 2020, Algorithm 2 with an inexact local
  solve of R steps); the server takes the sample-weighted mean.
* ``mine.gd_strongly_convex`` — gradient descent with step 1/L on an L-smooth, μ-strongly
  convex quadratic satisfies f(x_t) − f* ≤ (1 − μ/L)^t (f(x_0) − f*) (Nesterov,
  *Introductory Lectures on Convex Optimization*, 2004, Theorem 2.1.15), measured in
  float64 against that bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from pfl_theory.validation import nonnegative, positive, positive_int
from verification.core.registry import Context, Outcome, bound_outcome, check


# ---------------------------------------------------------------------- the algorithm
@register("my-fedprox")
@dataclass(frozen=True)
class MyFedProx(Algorithm):
    """FedProx-style training (Li et al., MLSys 2020, Algorithm 2): η = ``lr``, μ = ``mu``,
    R = ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    lr: float = hp(0.02, "local SGD learning rate η", check=positive, symbol="η")
    mu: float = hp(0.1, "proximal weight μ of (μ/2)‖w − w^t‖²", check=nonnegative,
                   symbol="μ")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        return State(0, seed, {"global": model.init(1, seed=seed, device=fed.device,
                                                   dtype=fed.dtype)})

    def first_phase(self, state: State, fed, model) -> Phase:
        """The server samples S clients and one mini-batch per local step for each."""
        return train_phase(state, fed, self.local_rounds, self.batch_size,
                           self.clients_per_round)

    def client_update(self, phase, model, view):
        """R steps w ← w − η(∇f_i(w; batch) + μ(w − w^t)) from the broadcast w^t, batched
        over the sampled clients (leading dimension); uploads the local model."""
        x, y = view.batches["sgd"]
        anchor = broadcast(view.server["global"], x.shape[1])
        w = {k: v.clone() for k, v in anchor.items()}
        for r in range(x.shape[0]):
            g, _ = model.grad(w, x[r], y[r])
            w = {k: w[k] - self.lr * (g[k] + self.mu * (w[k] - anchor[k])) for k in w}
        return {}, {"global": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """w^{t+1} = Σ n_i w_i / Σ n_i over the clients that uploaded."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}


# -------------------------------------------------------------------------- the check
def gd_gaps(eigenvalues: np.ndarray, x0: np.ndarray, step: float, steps: int) -> np.ndarray:
    """f(x_t) − f* for t = 0..steps of gradient descent x ← x − step·∇f on the diagonal
    quadratic f(x) = ½ Σ λ_j x_j² (f* = 0 at x = 0), float64."""
    x, gaps = np.asarray(x0, dtype=np.float64).copy(), []
    for _ in range(steps + 1):
        gaps.append(0.5 * float(np.sum(eigenvalues * x * x)))
        x = x - step * eigenvalues * x
    return np.array(gaps)


@check("mine.gd_strongly_convex", paper="Nesterov (2004)",
       reference="Theorem 2.1.15: f(x_t) − f* ≤ (1 − μ/L)^t (f(x_0) − f*) at step 1/L",
       kind="bound",
       quick={"dim": 20, "mu": 0.1, "L": 10.0, "steps": 50, "step_times_L": 1.0},
       full={"dim": 200, "mu": 0.01, "L": 10.0, "steps": 500, "step_times_L": 1.0})
def gd_strongly_convex(ctx: Context) -> Outcome:
    """Gradient descent at step ``step_times_L``/L on ½ xᵀAx with A's eigenvalues spread
    over [μ, L] (μ and L attained): the worst ratio over t of the measured gap to the
    bound (1 − μ/L)^t (f(x_0) − f*); the trivial bound is f(x_0) − f* itself.  Exact up to
    float64 rounding (~1e-16 relative), so no tolerance."""
    p = ctx.params
    rng = np.random.default_rng(ctx.seed)
    lam = np.concatenate([[p["mu"], p["L"]], rng.uniform(p["mu"], p["L"], p["dim"] - 2)])
    gaps = gd_gaps(lam, rng.standard_normal(p["dim"]), p["step_times_L"] / p["L"], p["steps"])
    t = np.arange(len(gaps))
    bounds = (1 - p["mu"] / p["L"]) ** t * gaps[0]
    worst = int(np.argmax(gaps[1:] / bounds[1:])) + 1        # the step closest to the bound
    return bound_outcome(gaps[worst], bounds[worst], trivial=gaps[0],
                         detail=f"worst step t = {worst} of {p['steps']}")
