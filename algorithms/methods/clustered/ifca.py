"""IFCA — A. Ghosh, J. Chung, D. Yin, K. Ramchandran, *An Efficient Framework for Clustered
Federated Learning*, NeurIPS 2020 (arXiv 2006.04088).  Algorithm 1, model-averaging variant;
a baseline of CGPFL (Tang, Guo, Guo, IJCAI 2022, Table 1, K = 4).

Round ``t`` (all clients batched):

1. the server holds K cluster models ``θ_1 … θ_K`` and samples ``S`` clients;
2. cluster estimation: every client picks ``ĵ(i) = argmin_j f_i(θ_j)`` (its full training
   loss; ties → lowest index);
3. each sampled client runs ``R`` local SGD steps (one mini-batch each, lr ``η``) from
   ``θ_{ĵ(i)}``;
4. per-cluster averaging: ``θ_j ← Σ_{i∈S, ĵ(i)=j} n_i θ̃_i / Σ n_i`` (sample-weighted like
   the engine's FedAvg; the paper's averaging is uniform over the cluster's clients — equal
   sizes make them identical).  A cluster that receives no client keeps its model.

Initialisation: K independent draws of the model (``model.init(K, same=False)``) — IFCA
needs distinct starts to break the symmetry.  With ``K = 1`` a round is exactly FedAvg's
(same generator stream: batches, then client sample).  Evaluated: ``cluster`` = each
client's current cluster model ``θ_{ĵ(i)}`` (re-estimated on the training data after the
round).  ``assignment`` (ĵ for all clients) is kept in ``state.tensors``.

Client/server split: the cluster estimate is the clients' (their own training loss); after
the server's per-cluster averaging a second exchange, ``estimate``, has every client
re-estimate ``ĵ(i)`` on the new models (also run once by ``init``).  A sampled client starts
from the cluster of its stored estimate — the same ``argmin`` on the same models that the
round would recompute.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, check_clients_per_round, clients_per_round_hp,
                             hp, register, select, validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, everyone, initial_state, train_phase, with_server
from algorithms.engine.evaluation import evaluate
from algorithms.engine.steps import local_sgd
from pfl_theory.validation import positive, positive_int


def best_cluster(model, clusters: dict, split) -> torch.Tensor:
    """``argmin_j f_i(θ_j)`` for every client (full-split mean loss), ``[N]`` long."""
    k = next(iter(clusters.values())).shape[0]
    losses = torch.stack([evaluate(model, select(clusters, torch.tensor([j], device=split.x.device)), split)[1]
                          for j in range(k)], dim=1)
    return losses.argmin(1)


@register("ifca")
@dataclass(frozen=True)
class IFCA(Algorithm):
    """IFCA (Ghosh, Chung, Yin, Ramchandran, NeurIPS 2020), Algorithm 1 (model averaging).
    Paper symbols: k = ``num_contexts`` (number of clusters), γ = ``lr`` (local step size),
    τ = R = ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    server_rows = {"assignment": 0}

    num_contexts: int = hp(4, "number K of cluster models", check=positive_int, symbol="k")
    lr: float = hp(0.02, "IFCA's γ: local SGD step size", check=positive, symbol="γ")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="τ")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def server_init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        if self.num_contexts > fed.num_clients:
            raise ValueError(f"num_contexts k={self.num_contexts} > number of clients "
                             f"N={fed.num_clients} (each cluster model needs clients)")
        clusters = model.init(self.num_contexts, seed=seed, device=fed.device,
                              dtype=fed.dtype, same=False)
        return State(0, seed, {"clusters": clusters})

    def init_phase(self, state: State, fed, model) -> Phase:
        return Phase("estimate", everyone(fed))

    def init(self, fed, model, seed: int) -> State:
        return initial_state(self, fed, model, seed)

    def first_phase(self, state: State, fed, model) -> Phase:
        def start(chosen):
            return {"start": select(state.models["clusters"],
                                    state.tensors["assignment"][chosen.to(fed.device)])}
        phase = train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)
        return Phase(phase.name, phase.clients, phase.batches, start(phase.clients), send=())

    def client_update(self, phase, model, view):
        """``estimate``: ``ĵ(i)`` on the client's training data (uploaded); ``train``: R SGD
        steps from ``θ_{ĵ(i)}``, uploads the model."""
        if phase.name == "estimate":
            return {}, {"assignment": best_cluster(model, view.server["clusters"], view.train)}
        x, y = view.batches["sgd"]
        return {}, {"model": local_sgd(model, view.payload["start"], x, y, self.lr)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "estimate":
            labels = state.tensors.get("assignment")
            new = uploads["assignment"]
            if labels is not None and phase.clients.numel() < fed.num_clients:
                new = labels.index_copy(0, phase.clients.to(labels.device), new)
            return with_server(state, tensors={"assignment": new}), None
        chosen = phase.upload_clients().to(fed.device)
        clusters, w = state.models["clusters"], uploads["model"]
        labels = state.tensors["assignment"][chosen]
        counts = fed.train.counts[chosen]
        new = {k: v.clone() for k, v in clusters.items()}
        for j in range(self.num_contexts):
            members = (labels == j).nonzero().flatten()
            if members.numel():
                mean = weighted_mean(select(w, members), counts[members])
                for k in new:
                    new[k][j] = mean[k][0]
        return with_server(state, {"clusters": new}), Phase("estimate", everyone(fed))

    def evaluated(self, state: State) -> dict:
        return {"cluster": select(state.models["clusters"], state.tensors["assignment"])}
