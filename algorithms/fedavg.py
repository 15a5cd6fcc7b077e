"""FedAvg and Local baselines.

FedAvg — McMahan, Moore, Ramage, Hampson, Agüera y Arcas, *Communication-Efficient
Learning of Deep Networks from Decentralized Data*, AISTATS 2017 (arXiv 1602.05629).
Each round the server samples ``S`` clients uniformly; each runs ``R`` SGD steps (one
mini-batch of size ``|D|`` each, as in the pFedMe code's "local epochs"); the server sets
the global model to the sample-weighted mean ``Σ n_i w_i / Σ n_i`` of their models.

Local — every client trains its own model with the same SGD steps and never communicates
(a lower reference for personalization).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, sample_clients,
                             validate_hyperparameters, weighted_mean)
from algorithms.steps import local_sgd
from pfl_theory.validation import positive, positive_int


@register("fedavg")
@dataclass(frozen=True)
class FedAvg:
    lr: float = hp(0.02, "local SGD learning rate η", check=positive)
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int)
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        return State(0, seed, {"global": model.init(1, seed=seed, device=fed.device,
                                                   dtype=fed.dtype)})

    def round(self, state: State, fed, model) -> State:
        gen = state.generator()
        batches = fed.sample_batches(self.local_rounds, self.batch_size, gen)
        chosen = sample_clients(fed.num_clients, self.clients_per_round, gen).to(fed.device)
        x, y = fed.train.gather(batches[:, chosen])
        w = local_sgd(model, broadcast(state.models["global"], chosen.numel()), x, y, self.lr)
        new_global = weighted_mean(w, fed.train.counts[chosen])
        return state.next({"global": new_global})

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}


@register("local")
@dataclass(frozen=True)
class Local:
    lr: float = hp(0.02, "local SGD learning rate η", check=positive)
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int)
    batch_size: int = batch_size_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        start = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"local": broadcast(start, fed.num_clients)})

    def round(self, state: State, fed, model) -> State:
        batches = fed.sample_batches(self.local_rounds, self.batch_size, state.generator())
        x, y = fed.train.gather(batches)
        return state.next({"local": local_sgd(model, state.models["local"], x, y, self.lr)})

    def evaluated(self, state: State) -> dict:
        return {"local": state.models["local"]}

