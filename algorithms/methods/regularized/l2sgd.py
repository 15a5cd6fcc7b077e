"""L2SGD — F. Hanzely, P. Richtárik, *Federated Learning of a Mixture of Global and Local
Models*, arXiv 2002.05516 (2020).  Algorithm 1 (L2GD) with mini-batch stochastic gradients
(the plain L2SGD variant, without the variance reduction of L2SGD+); a baseline of CGPFL
(Tang, Guo, Guo, IJCAI 2022, Table 1).

Objective: ``min_{x_1..x_n} (1/n) Σ_i f_i(x_i) + λ (1/(2n)) Σ_i ‖x_i − x̄‖²``, ``x̄ = mean_i x_i``.
Each iteration flips one coin ``ξ ~ Bernoulli(p)`` for the whole federation:

* ``ξ = 0`` (local step):      ``x_i ← x_i − η/(1−p) ∇f̃_i(x_i)``;
* ``ξ = 1`` (averaging step):  ``x_i ← x_i − (ηλ/p)(x_i − x̄)`` (communication),

with ``η = α/n`` the paper's step ``α`` per client (``lr`` here) — the unbiased estimator
``G(x)`` of ``∇F`` of the paper divided by n.  ``ηλ/p ≤ 1`` is required (= 1 sets every
``x_i`` to ``x̄``).  One engine round = ``R`` iterations on ``R`` mini-batches (drawn first
from the round's stream, then the ``R`` coins).  ``λ = 0`` is pure local training.
Evaluated: ``personalized`` ``x_i``, ``global`` ``x̄`` (plain mean).

Client/server split: every averaging coin is one exchange — the clients upload ``x_i``, the
server sets ``global`` = ``x̄`` and the clients apply the averaging step with it before their
next local steps; the round ends with one more upload, so the state's ``global`` is ``x̄``
of the final ``x_i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, broadcast, hp, register,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, with_server
from pfl_theory.validation import in_open_unit, nonnegative, positive, positive_int


@register("l2sgd")
@dataclass(frozen=True)
class L2SGD(Algorithm):
    """L2SGD (Hanzely, Richtárik, arXiv 2002.05516), Algorithm 1 (L2GD, stochastic
    gradients).  Paper symbols: α/n = ``lr`` (the paper's step α per client), λ = ``lam``,
    p = ``avg_prob``, R = ``local_rounds`` iterations, |D| = ``batch_size``."""

    client_models = ("personalized",)
    lazy_batches = True     # every client trains: one step's batch gathered at a time (LazyRows)

    lr: float = hp(0.02, "step η = α/n of the local gradient step (scaled by 1/(1−p))",
                   check=positive, symbol="α/n")
    lam: float = hp(1.0, "penalty λ on the distance of local models to their mean",
                    check=nonnegative, symbol="λ")
    avg_prob: float = hp(0.1, "probability p of an averaging (communication) step", symbol="p")
    local_rounds: int = hp(20, "iterations R per round (one mini-batch each)", check=positive_int,
                           symbol="R")
    batch_size: int = batch_size_hp()

    def __post_init__(self):
        validate_hyperparameters(self)
        in_open_unit("avg_prob", self.avg_prob)
        if self.lr * self.lam / self.avg_prob > 1:
            raise ValueError(f"the averaging weight lr*lam/avg_prob must be <= 1, got "
                             f"{self.lr * self.lam / self.avg_prob:.4g}")

    def init(self, fed, model, seed: int) -> State:
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"personalized": broadcast(w, fed.num_clients), "global": w})

    def first_phase(self, state: State, fed, model) -> Phase:
        """Draws the R mini-batches, then the R coins; segment 0 = the local steps before
        the first averaging coin."""
        gen = state.generator()
        batches = fed.sample_batches(self.local_rounds, self.batch_size, gen)
        coins = (torch.rand(self.local_rounds, generator=gen, dtype=torch.float64)
                 < self.avg_prob).tolist()
        averages = [r for r, c in enumerate(coins) if c]
        bounds = [0] + averages + [self.local_rounds]
        segments = [(bool(k), bounds[k] + bool(k), bounds[k + 1]) for k in range(len(bounds) - 1)]
        return self._segment(batches, segments, 0)

    def _segment(self, batches, segments, k) -> Phase:
        average_first, start, stop = segments[k]
        return Phase(f"segment{k}", torch.arange(batches.shape[1]),
                     {"sgd": batches[start:stop]} if stop > start else {},
                     info={"average_first": average_first},
                     plan=(batches, segments, k))

    def client_update(self, phase, model, view):
        """(Averaging step with the server's ``x̄``), then local steps; uploads ``x_i``."""
        p = view.models["personalized"]
        if phase.info["average_first"]:
            theta, mean = self.lr * self.lam / self.avg_prob, view.server["global"]
            p = {k: v - theta * (v - mean[k]) for k, v in p.items()}
        if "sgd" in view.batches:
            x, y = view.batches["sgd"]
            step = self.lr / (1 - self.avg_prob)
            for r in range(x.shape[0]):
                g, _ = model.grad(p, x[r], y[r])
                p = {k: p[k] - step * g[k] for k in p}
        return {"personalized": p}, {"personalized": p}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``x̄`` of the uploads; the next segment, if any."""
        batches, segments, k = phase.plan
        mean = {k_: v.mean(0, keepdim=True) for k_, v in uploads["personalized"].items()}
        state = with_server(state, {"global": mean},
                            {"averaging_steps": torch.tensor(len(segments) - 1)})
        if k + 1 == len(segments):
            return state, None
        return state, self._segment(batches, segments, k + 1)

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}
