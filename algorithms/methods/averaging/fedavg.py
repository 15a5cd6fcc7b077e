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

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, local_lr_hp, local_rounds_hp, register,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, everyone, train_phase, with_server
from algorithms.engine.steps import local_sgd


@register("fedavg")
@dataclass(frozen=True)
class FedAvg(Algorithm):
    """FedAvg (McMahan et al., AISTATS 2017): paper symbols η = ``lr``, R = ``local_rounds``
    (local SGD steps, one mini-batch each), |D| = ``batch_size``, S = ``clients_per_round``."""

    #: its local SGD moves BatchNorm running statistics (``--model mlp-bn``), averaged with
    #: the rest: FedBN's "FedAvg" baseline
    batchnorm_statistics = True

    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        return State(0, seed, {"global": model.init(1, seed=seed, device=fed.device,
                                                   dtype=fed.dtype)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """R SGD steps from the broadcast ``w^t``; uploads the local model."""
        x, y = view.batches["sgd"]
        return {}, {"global": local_sgd(model, broadcast(view.server["global"], x.shape[1]),
                                        x, y, self.lr, owned=True)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``w^{t+1} = Σ n_i w_i / Σ n_i`` over the uploads."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}


@register("local")
@dataclass(frozen=True)
class Local(Algorithm):
    """Local training (no communication), the lower reference of the pFedMe (Dinh et al.,
    NeurIPS 2020) and CGPFL (Tang et al., IJCAI 2022) tables: η = ``lr``, R =
    ``local_rounds``, |D| = ``batch_size`` (FedAvg's local step)."""

    client_models = ("local",)
    batchnorm_statistics = True     # local SGD moves BatchNorm statistics (--model mlp-bn)
    lazy_batches = True     # every client trains: one step's batch gathered at a time (LazyRows)

    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        start = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"local": broadcast(start, fed.num_clients)})

    def first_phase(self, state: State, fed, model) -> Phase:
        batches = fed.sample_batches(self.local_rounds, self.batch_size, state.generator())
        return Phase("train", everyone(fed), {"sgd": batches}, uploaders=everyone(fed)[:0])

    def client_update(self, phase, model, view):
        x, y = view.batches["sgd"]
        return {"local": local_sgd(model, view.models["local"], x, y, self.lr)}, {}

    def server_aggregate(self, phase, state, uploads, fed, model):
        return state, None

    def evaluated(self, state: State) -> dict:
        return {"local": state.models["local"]}

