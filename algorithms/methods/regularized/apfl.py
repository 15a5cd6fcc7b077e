"""APFL — Y. Deng, M. M. Kamani, M. Mahdavi, *Adaptive Personalized Federated Learning*,
arXiv 2003.13461 (2020).  Algorithm 1 (with adaptive α, §3.3 eq. 10); a baseline of CGPFL
(Tang, Guo, Guo, IJCAI 2022, Table 1).

Every client keeps a local model ``v_i`` and a mixing weight ``α_i ∈ [0, 1]``; its
personalized model is ``v̄_i = α_i v_i + (1 − α_i) w_i``.  Round ``t`` (all sampled
clients batched; ``S`` sampled uniformly, as FedAvg):

1. sampled clients set ``w_i = w^t``;
2. for ``r = 0 … R−1`` on one mini-batch ``D`` each (the same batch for the three updates):
   ``w_i ← w_i − η ∇f̃_i(w_i)``;
   ``v_i ← v_i − η ∇_v f̃_i(v̄_i) = v_i − η α_i ∇f̃_i(v̄_i)`` (chain rule);
   ``α_i ← clip_[0,1](α_i − η_α ⟨v_i − w_i, ∇f̃_i(v̄_i)⟩)`` (eq. 10), all with the
   pre-step values;
3. ``w^{t+1}`` = sample-weighted mean of the sampled ``w_i`` (as the engine's FedAvg).

Unsampled clients keep ``v_i, α_i``.  ``mix_lr = 0`` freezes ``α_i = mix_init`` (the paper's
fixed-α variant); with ``mix_init = 0`` and ``mix_lr = 0`` the global model is exactly
FedAvg's (same generator stream) and ``v_i`` never moves.  Evaluated: ``personalized``
``v̄_i = α_i v_i + (1 − α_i) w^{t+1}`` (the model the client would deploy after the round)
and ``global`` ``w^{t+1}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.steps import sgd_update
from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from pfl_theory.validation import in_range, nonnegative, positive, positive_int


def mix(alpha: torch.Tensor, v: dict, w: dict) -> dict:
    """``α_i v_i + (1 − α_i) w_i`` per client (``w`` may be ``[1, ...]``)."""
    return {k: alpha.view(-1, *[1] * (v[k].ndim - 1)) * v[k]
            + (1 - alpha.view(-1, *[1] * (v[k].ndim - 1))) * w[k] for k in v}


@register("apfl")
@dataclass(frozen=True)
class APFL(Algorithm):
    """APFL (Deng, Kamani, Mahdavi, arXiv 2003.13461), Algorithm 1 with adaptive α (eq. 10).
    Paper symbols: η = ``lr`` (global and local models), α_i⁰ = ``mix_init``, η_α =
    ``mix_lr``, R = ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("local",)
    client_tensors = ("alpha",)

    lr: float = hp(0.02, "local SGD learning rate η (global and local models)", check=positive,
                   symbol="η")
    mix_init: float = hp(0.5, "initial mixing weight α_i ∈ [0, 1]", symbol="α_i⁰")
    mix_lr: float = hp(0.01, "learning rate η_α of the adaptive α update (0: fixed α)",
                       check=nonnegative, symbol="η_α")
    local_rounds: int = hp(20, "local steps R per round (one mini-batch each)", check=positive_int,
                           symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)
        in_range("mix_init", self.mix_init, 0.0, 1.0)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        alpha = torch.full((fed.num_clients,), self.mix_init, dtype=fed.dtype, device=fed.device)
        return State(0, seed, {"global": w, "local": broadcast(w, fed.num_clients)},
                     {"alpha": alpha})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """Step 2 from ``w^t`` and the client's own ``v_i, α_i``; uploads ``w_i``."""
        x, y = view.batches["sgd"]
        w = broadcast(view.server["global"], x.shape[1])
        v, a = view.models["local"], view.tensors["alpha"]
        for r in range(self.local_rounds):
            gw, _ = model.grad(w, x[r], y[r])
            gbar, _ = model.grad(mix(a, v, w), x[r], y[r])
            inner = sum(((v[k] - w[k]) * gbar[k]).flatten(1).sum(1) for k in v)
            v = {k: v[k] - self.lr * (a.view(-1, *[1] * (v[k].ndim - 1)) * gbar[k]) for k in v}
            w = sgd_update(w, gw, self.lr, in_place=True)        # own (broadcast)
            a = (a - self.mix_lr * inner).clamp(0.0, 1.0)
        return {"local": v, "alpha": a}, {"global": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": mix(state.tensors["alpha"], state.models["local"],
                                    state.models["global"]),
                "global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        return {"mean_alpha": float(state.tensors["alpha"].mean())}
