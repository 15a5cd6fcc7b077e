"""Body/head decoupling baselines: FedRep, FedPer, LG-FedAvg (helpers: :mod:`algorithms.engine.heads`).

A network is an ordered list of layers (``model.layers``); ``head_layers = k`` names the
last ``k`` layers the *head* ψ, the others the *body* (representation) φ.  All clients are
batched; every round the server samples ``S`` clients (``clients_per_round``) uniformly, only
those train, and the server averages the shared part over them (``aggregation``:
``"uniform"`` = plain mean as in the FedRep paper, ``"weighted"`` = by sample counts).
Mini-batches are drawn uniformly with replacement (:meth:`Federation.sample_batches`), one
mini-batch per local step (steps, not epochs).

* **FedRep** — L. Collins, H. Hassani, A. Mokhtari, S. Shakkottai, *Exploiting Shared
  Representations for Personalized Federated Learning*, ICML 2021 (arXiv 2102.07078),
  Algorithm 1.  Client i (body φ fixed at the server's φ^t): ``head_steps`` SGD steps on its
  head ψ_i, ``ψ_i ← ψ_i − η ∇_ψ f_i(φ^t, ψ_i)``; then, with the new head fixed,
  ``local_rounds`` SGD steps on the body ``φ_i ← φ_i − η ∇_φ f_i(φ_i, ψ_i)``; server
  ``φ^{t+1} = mean_{i∈S^t} φ_i``; heads stay on the clients.  (Paper: 10 head epochs, 1 body
  epoch; here steps.)
* **FedPer** — M. G. Arivazhagan, V. Aggarwal, A. K. Singh, S. Choudhary, *Federated
  Learning with Personalization Layers*, arXiv 1912.00818 (2019).  ``local_rounds`` joint SGD
  steps on (φ, ψ_i) from (φ^t, ψ_i); server averages φ; heads personal.
* **LG-FedAvg** — P. P. Liang, T. Liu, L. Ziyin, N. B. Allen, R. P. Auerbach, D. Brent,
  R. Salakhutdinov, L.-P. Morency, *Think Locally, Act Globally: Federated Learning with
  Local and Global Representations*, arXiv 2001.01523 (2020).  The roles are swapped: the
  *representation* (body) layers are local to each client, the last ``head_layers`` layers
  are global.  ``local_rounds`` joint SGD steps; server averages the head only.

Evaluated models (honest names): ``personalized`` = client i's own full network
(FedRep/FedPer: global body + own head; LG-FedAvg: own body + global head).  None of
the three has a global model that is a full network, so none is reported.
A client that was never sampled keeps its initial head (body), as in the papers.
``head_layers = L`` (the whole network) is allowed: the shared part is then empty and
FedRep/FedPer reduce to local training (LG-FedAvg to FedAvg).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, register,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.heads import (aggregate, check_aggregation, fedrep_update, merge,
                                     param_count, partial_sgd, split_keys, subset)
from pfl_theory.validation import positive_int


@dataclass(frozen=True)
class _Decoupled(Algorithm):
    """Shared hyper-parameters and the body/head state layout: η = ``lr``, R =
    ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("personal",)

    lr: float = local_lr_hp()
    local_rounds: int = hp(10, "local SGD steps R per round on the body / jointly (one mini-batch each)",
                           check=positive_int, symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    head_layers: int = hp(1, "number of last layers personalized (the head)", check=positive_int,
                          symbol="—")
    aggregation: str = hp("uniform", "server mean: 'uniform' (papers) or 'weighted' by samples",
                          symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        check_aggregation(self.aggregation)

    shared_part = "body"   # which part the server averages ("body" or "head")
    steps_per_round = property(lambda self: self.local_rounds)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        body, head = split_keys(model, self.head_layers)
        shared, personal = (body, head) if self.shared_part == "body" else (head, body)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"shared": subset(w, shared),
                               "personal": broadcast(subset(w, personal), fed.num_clients)})

    def local_update(self, model, params, x, y, shared_keys, personal_keys):
        return partial_sgd(model, params, list(params), x, y, self.lr)

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.steps_per_round, self.batch_size,
                           self.clients_per_round)

    def client_update(self, phase, model, view):
        """The local update from (shared part, own personal part); uploads the shared part."""
        x, y = view.batches["sgd"]
        shared, personal = view.server.get("shared", {}), view.models["personal"]
        params = merge(shared, personal, n=x.shape[1])
        params = self.local_update(model, params, x, y, list(shared), list(personal))
        return {"personal": subset(params, personal)}, {"shared": subset(params, shared)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"shared": aggregate(uploads.get("shared", {}), counts,
                                                       self.aggregation)}), None

    def evaluated(self, state: State) -> dict:
        personal, shared = state.models["personal"], state.models["shared"]
        if not personal:          # LG-FedAvg with head_layers = L: everything is global
            return {"global": shared}
        n = next(iter(personal.values())).shape[0]
        return {"personalized": {k: v.contiguous() for k, v in merge(shared, personal, n=n).items()}}

    def diagnostics(self, state: State, fed, model) -> dict:
        """Parameters communicated: 2·S·|shared| per round (down- and upload)."""
        per_round = 2 * self.clients_per_round * param_count(state.models["shared"])
        return {"comm_params_per_round": float(per_round),
                "comm_params_total": float(per_round * state.round),
                "personal_params": float(param_count(state.models["personal"]))}


@register("fedrep")
@dataclass(frozen=True)
class FedRep(_Decoupled):
    """FedRep (Collins, Hassani, Mokhtari, Shakkottai, ICML 2021), Algorithm 1: η = ``lr``
    for head and body, τ (head epochs) ↔ ``head_steps`` SGD steps, body steps =
    ``local_rounds``."""

    head_steps: int = hp(10, "local SGD steps on the head (body fixed) before the body steps",
                         check=positive_int, symbol="τ")

    def __post_init__(self):
        super().__post_init__()

    steps_per_round = property(lambda self: self.head_steps + self.local_rounds)

    def local_update(self, model, params, x, y, shared_keys, personal_keys):
        return fedrep_update(model, params, personal_keys, shared_keys, x, y,
                             head_steps=self.head_steps, lr=self.lr)


@register("fedper")
@dataclass(frozen=True)
class FedPer(_Decoupled):
    """FedPer (Arivazhagan, Aggarwal, Singh, Choudhary, arXiv 1912.00818): joint SGD (η =
    ``lr``) on the body and the personal head; the server averages the body."""


@register("lgfedavg")
@dataclass(frozen=True)
class LGFedAvg(_Decoupled):
    """LG-FedAvg (Liang et al., arXiv 2001.01523): local representation layers, global last
    ``head_layers`` layers averaged by the server; η = ``lr``."""

    shared_part = "head"
