"""FedBN — X. Li, M. Jiang, X. Zhang, M. Kamp, Q. Dou, *FedBN: Federated Learning on Non-IID
Features via Local Batch Normalization*, ICLR 2021 (arXiv 2102.07623), Algorithm 1.

Every client keeps its BatchNorm layers — the affine γ, β and the running statistics — and
never sends them; the server averages every other parameter.  Round ``t`` (``S`` clients
sampled uniformly; the paper has every client take part, ``S = N``):

* client ``k``: from the shared layers ``w^t`` and its own BN entries, ``R`` SGD steps in
  training mode (batch statistics; the running statistics move with momentum 0.1, as
  ``torch.nn.BatchNorm1d``; see :mod:`algorithms.engine.models_norm`); keeps the BN entries,
  uploads the rest;
* server: ``w^{t+1}_l = mean_k w_{k,l}`` for every non-BN layer ``l`` (Algorithm 1; the
  authors' code weighs the clients equally: ``aggregation = "uniform"``, the default).

Which entries are BN is the model's ``norm_keys`` (:class:`~algorithms.engine.models_norm.
BatchNormMLP`: every ``bn*`` entry).  On a model without normalisation layers nothing is
local and FedBN is FedAvg (McMahan et al., AISTATS 2017) — bit for bit with ``aggregation =
"weighted"`` (tested).  Evaluated: ``personalized`` = shared layers + the client's own BN
layers (a model with BN has no global model that is a whole network), or ``global`` on a
model without BN.  A client never sampled keeps its initial BN entries (γ = 1, β = 0,
statistics 0 / 1).

Departures: ``R`` mini-batch steps per round instead of E local epochs (paper: E = 1, SGD
lr 10⁻², batch 32, the defaults here apart from R); mini-batches drawn with replacement.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, one_of, register,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.heads import aggregate, merge, subset
from algorithms.engine.steps import local_sgd
from pfl_theory.validation import positive, positive_int


def norm_keys(model) -> tuple[str, ...]:
    """The model's normalisation entries (empty for a model without normalisation layers)."""
    return tuple(getattr(model, "norm_keys", ()))


@register("fedbn")
@dataclass(frozen=True)
class FedBN(Algorithm):
    """FedBN (Li, Jiang, Zhang, Kamp, Dou, ICLR 2021), Algorithm 1: BN layers local, the rest
    averaged.  Paper symbols: η = ``lr``, E ↔ R = ``local_rounds`` (steps here), |D| =
    ``batch_size``, K ↔ S = ``clients_per_round``."""

    client_models = ("local_norm",)
    batchnorm_statistics = True     # local SGD moves the (local) BatchNorm statistics

    lr: float = hp(0.01, "local SGD learning rate η", check=positive, symbol="η")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="E")
    batch_size: int = batch_size_hp(32)
    clients_per_round: int = clients_per_round_hp()
    aggregation: str = hp("uniform", "server mean of the shared layers: 'uniform' (paper's "
                          "code) or 'weighted' by sample counts (FedAvg's)",
                          check=one_of("uniform", "weighted"), symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        local = norm_keys(model)
        shared = [k for k in w if k not in local]
        return State(0, seed, {"global": subset(w, shared),
                               "local_norm": broadcast(subset(w, local), fed.num_clients)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """R SGD steps (BN in training mode) from the shared layers and the own BN entries;
        keeps the BN entries, uploads the shared layers."""
        x, y = view.batches["sgd"]
        shared, own = view.server["global"], view.models["local_norm"]
        params = _in_model_order(model, merge(broadcast(shared, x.shape[1]), own))
        params = local_sgd(model, params, x, y, self.lr)
        return {"local_norm": subset(params, own)}, {"global": subset(params, shared)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``w^{t+1}_l = mean_k w_{k,l}`` for the non-BN layers (uniform or by counts)."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": aggregate(uploads["global"], counts,
                                                       self.aggregation)}), None

    def evaluated(self, state: State) -> dict:
        shared, local = state.models["global"], state.models["local_norm"]
        if not local:
            return {"global": shared}
        n = next(iter(local.values())).shape[0]
        return {"personalized": {k: v.contiguous() for k, v in merge(shared, local, n=n).items()}}


def _in_model_order(model, params: Params) -> Params:
    """``params`` in the model's layer order (keys outside ``model.layers`` last)."""
    order = [k for layer in getattr(model, "layers", []) for k in layer if k in params]
    return {**{k: params[k] for k in order}, **params}
