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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.base import (State, batch_size_hp, broadcast, hp, register,
                             validate_hyperparameters)
from pfl_theory.validation import in_open_unit, nonnegative, positive, positive_int


@register("l2sgd")
@dataclass(frozen=True)
class L2SGD:
    lr: float = hp(0.02, "step η = α/n of the local gradient step (scaled by 1/(1−p))",
                   check=positive)
    lam: float = hp(1.0, "penalty λ on the distance of local models to their mean",
                    check=nonnegative)
    avg_prob: float = hp(0.1, "probability p of an averaging (communication) step")
    local_rounds: int = hp(20, "iterations R per round (one mini-batch each)", check=positive_int)
    batch_size: int = batch_size_hp()

    def __post_init__(self):
        validate_hyperparameters(self)
        in_open_unit("avg_prob", self.avg_prob)
        if self.lr * self.lam / self.avg_prob > 1:
            raise ValueError(f"the averaging weight lr*lam/avg_prob must be <= 1, got "
                             f"{self.lr * self.lam / self.avg_prob:.4g}")

    def init(self, fed, model, seed: int) -> State:
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"personalized": broadcast(w, fed.num_clients)})

    def round(self, state: State, fed, model) -> State:
        gen = state.generator()
        batches = fed.sample_batches(self.local_rounds, self.batch_size, gen)
        coins = (torch.rand(self.local_rounds, generator=gen, dtype=torch.float64)
                 < self.avg_prob).tolist()
        x, y = fed.train.gather(batches)
        p = state.models["personalized"]
        theta, step = self.lr * self.lam / self.avg_prob, self.lr / (1 - self.avg_prob)
        for r, average in enumerate(coins):
            if average:
                p = {k: v - theta * (v - v.mean(0, keepdim=True)) for k, v in p.items()}
            else:
                g, _ = model.grad(p, x[r], y[r])
                p = {k: p[k] - step * g[k] for k in p}
        return state.next({"personalized": p}, {"averaging_steps": torch.tensor(sum(coins))})

    def evaluated(self, state: State) -> dict:
        p = state.models["personalized"]
        return {"personalized": p, "global": {k: v.mean(0, keepdim=True) for k, v in p.items()}}
