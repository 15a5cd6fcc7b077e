"""FedALA — J. Zhang, Y. Hua, H. Wang, T. Song, Z. Xue, R. Ma, H. Guan, *FedALA: Adaptive
Local Aggregation for Personalized Federated Learning*, AAAI 2023 (arXiv 2212.01197),
Algorithm 1.

Each client keeps its local model Θ_i and, for the last ``p`` layers, element-wise
aggregation weights W_i ∈ [0, 1] (initially 1).  Round ``t`` (``S`` clients sampled):

1. Adaptive local aggregation (ALA, eq. 4–5): the client's starting model is
   ``Θ̂_i = Θ_i + (Θ − Θ_i) ⊙ [1; W_i]`` — the global model Θ on the lower layers, a learned
   element-wise mix on the higher ``p`` layers.  W_i is trained first, on mini-batches of
   the client's data with Θ and Θ_i fixed,
   ``W_i ← clip(W_i − η_W ∇_{Θ̂} L(Θ̂_i) ⊙ (Θ − Θ_i), 0, 1)`` (eq. 5, the chain rule through
   ``Θ̂``), ``Θ̂_i`` recomputed after every step;
2. local training: R SGD steps (η) from ``Θ̂_i``; the client keeps Θ_i and W_i and uploads
   Θ_i;
3. server: ``Θ ← Σ n_i Θ_i / Σ n_i`` (FedAvg).

(Equation numbers 4–5 as we recall the arXiv version; no copy of the paper here to check
them against — the updates are written out above and match the authors' ALA module: see
benchmarks/side_by_side_pfllib.py.)

The mix is computed as ``Θ̂ = Θ − (Θ − Θ_i) ⊙ (1 − W)`` (the same value in exact
arithmetic), so with W = 1 it *is* Θ: with no ALA step (``ala_steps = ala_start_steps = 0``)
FedALA is FedAvg (McMahan et al., AISTATS 2017) bit for bit (tested).  A client whose local
model equals Θ on the higher layers skips ALA (nothing to mix; the authors' code checks
the same), which is every client in round 0.

Departures (the batched engine needs fixed step counts): the paper trains W_i on a random
``s`` = 80% of the local data, one epoch per round, and in a client's first ALA until the
loss settles (std of the last losses < 0.1); here ``ala_steps`` mini-batches (uniform with
replacement) per round and ``ala_start_steps`` in a client's first ALA.  Steps, not epochs,
for local training.  Paper defaults: η_W = 1, p = 1 layer (the authors' code's
``layer_idx = 2`` parameter tensors: the last layer's weight and bias).  Evaluated:
``personalized`` — the clients' local models Θ_i after local training — and ``global`` Θ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, register,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.heads import split_keys
from algorithms.engine.steps import local_sgd
from pfl_theory.validation import positive, positive_int


def nonnegative_int(name: str, value) -> int:
    return positive_int(name, value, minimum=0)


def ala_mix(global_: Params, local: Params, weights: Params) -> Params:
    """``Θ̂ = Θ − (Θ − Θ_i) ⊙ (1 − W)`` on the keys of ``weights``, Θ on the others."""
    return {k: g - (g - local[k]) * (1 - weights[k]) if k in weights else g
            for k, g in global_.items()}


def ala_train(model, global_: Params, local: Params, weights: Params, x, y, *, lr: float,
              steps: torch.Tensor) -> Params:
    """FedALA eq. 5: ``W ← clip(W − η_W ∇_{Θ̂}L(Θ̂) ⊙ (Θ − Θ_i), 0, 1)``, one mini-batch
    ``x[k]`` per step; client ``j`` takes the first ``steps[j]`` steps (its weights stay
    put after)."""
    diff = {k: global_[k] - local[k] for k in weights}
    for k in range(x.shape[0]):
        move = (steps > k)
        if not bool(move.any()):
            break
        g, _ = model.grad(ala_mix(global_, local, weights), x[k], y[k])
        new = {n: (w - lr * g[n] * diff[n]).clamp(0.0, 1.0) for n, w in weights.items()}
        weights = {n: torch.where(move.view(-1, *[1] * (w.dim() - 1)), new[n], w)
                   for n, w in weights.items()}
    return weights


@register("fedala")
@dataclass(frozen=True)
class FedALA(Algorithm):
    """FedALA (Zhang et al., AAAI 2023), Algorithm 1.  Symbols: η = ``lr`` (local SGD), η_W
    = ``ala_lr``, p = ``ala_layers`` (higher layers mixed element-wise), E ↔ R =
    ``local_rounds`` (steps), |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("local", "ala_weights")
    client_tensors = ("ala_started",)

    lr: float = local_lr_hp()
    ala_lr: float = hp(1.0, "learning rate η_W of the ALA weights", check=positive,
                       symbol="η_W")
    ala_layers: int = hp(1, "number p of higher layers aggregated element-wise",
                         check=positive_int, symbol="p")
    ala_steps: int = hp(10, "ALA mini-batch steps per round (paper: one epoch on s = 80 "
                        "percent of the data)", check=nonnegative_int, symbol="—")
    ala_start_steps: int = hp(50, "ALA steps in a client's first ALA (paper: until the loss "
                              "settles)", check=nonnegative_int, symbol="—")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="E")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        _, higher = split_keys(model, self.ala_layers)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        ones = {k: torch.ones_like(w[k]) for k in higher}
        return State(0, seed, {"global": w, "local": broadcast(w, fed.num_clients),
                               "ala_weights": broadcast(ones, fed.num_clients)},
                     {"ala_started": torch.zeros(fed.num_clients, device=fed.device,
                                                 dtype=fed.dtype)})

    def first_phase(self, state: State, fed, model) -> Phase:
        phase = train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)
        most = max(self.ala_steps, self.ala_start_steps)
        if most == 0:
            return phase
        ala = fed.sample_batches(most, self.batch_size, state.generator(1), clients=phase.clients)
        return Phase(phase.name, phase.clients, {**phase.batches, "ala": ala})

    def client_update(self, phase, model, view):
        """ALA (a client's first one with ``ala_start_steps``), then R SGD steps; keeps
        Θ_i, W_i, uploads Θ_i."""
        g = broadcast(view.server["global"], view.clients.numel())
        local, weights = view.models["local"], view.models["ala_weights"]
        started = view.tensors["ala_started"]
        differs = torch.stack([(g[k] != local[k]).flatten(1).any(1) for k in weights]).any(0)
        if "ala" in view.batches:
            steps = torch.where(started > 0, self.ala_steps, self.ala_start_steps)
            steps = torch.where(differs, steps, 0)
            xa, ya = view.batches["ala"]
            weights = ala_train(model, g, local, weights, xa, ya, lr=self.ala_lr, steps=steps)
        x, y = view.batches["sgd"]
        new = local_sgd(model, ala_mix(g, local, weights), x, y, self.lr)
        started = torch.where(differs, torch.ones_like(started), started)
        return ({"local": new, "ala_weights": weights, "ala_started": started},
                {"global": new})

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``Θ ← Σ n_i Θ_i / Σ n_i`` over the uploads."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["local"], "global": state.models["global"]}
