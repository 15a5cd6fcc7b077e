"""Ditto — T. Li, S. Hu, A. Beirami, V. Smith, *Ditto: Fair and Robust Federated Learning
Through Personalization*, ICML 2021 (arXiv 2012.04221).  Algorithm 1; a baseline of CGPFL
(Tang, Guo, Guo, IJCAI 2022, Table 1).

Objective per client: ``min_v f_i(v) + λ/2 ‖v − w*‖²`` with ``w*`` the FedAvg solution.
Round ``t`` (``S`` clients sampled uniformly, batched):

1. global: each sampled client runs ``R`` SGD steps (lr ``η``) from ``w^t``; the server
   sets ``w^{t+1}`` to the sample-weighted mean (exactly the engine's FedAvg, same stream);
2. personal: each sampled client takes ``R`` steps
   ``v_i ← v_i − η_p (∇f̃_i(v_i) + λ(v_i − w^t))`` on the same ``R`` mini-batches
   (the paper's ``s`` local personal iterations; ``s = R`` here).

Unsampled clients keep ``v_i``; ``v_i^0 = w^0``.  As ``λ → ∞`` (with ``η_p λ ≤ 1``) the
personal models collapse onto ``w^t``.  Evaluated: ``personalized`` ``v_i``, ``global``
``w^{t+1}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, sq_distance,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.steps import local_sgd, prox_steps
from pfl_theory.validation import positive, positive_int


@register("ditto")
@dataclass(frozen=True)
class Ditto(Algorithm):
    """Ditto (Li, Hu, Beirami, Smith, ICML 2021), Algorithm 1.  Paper symbols: λ = ``lam``,
    η = ``lr`` (global-model SGD), η_p = ``personal_lr`` (personal model), s = R =
    ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("personalized",)
    lazy_batches = True     # one local round's mini-batch gathered at a time (contract.LazyRows)

    lam: float = hp(0.1, "regularisation λ pulling personal models to the global model",
                    check=positive, symbol="λ")
    lr: float = hp(0.02, "local SGD learning rate η of the global (FedAvg) model", check=positive,
                   symbol="η")
    personal_lr: float = hp(0.02, "learning rate η_p of the personal model", check=positive,
                            symbol="η_p")
    local_rounds: int = hp(20, "local steps R per round (one mini-batch each)", check=positive_int,
                           symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"global": w, "personalized": broadcast(w, fed.num_clients)})

    def local_update(self, model, w_global, v, x, y):
        """A client's work (all given clients batched): R SGD steps of the global model from
        ``w_global`` ([1, ...]) and, on the same mini-batches, one step per batch of the
        personal objective ``f_i(v) + λ/2‖v − w^t‖²``.  ``x[R, n, B, ...]`` (tensors, or
        :class:`algorithms.engine.contract.LazyRows`: round ``r``'s batch is gathered once, used by
        both models); returns ``(w [n, ...], v [n, ...])``."""
        anchor = broadcast(w_global, x.shape[1])
        w = anchor
        for r in range(x.shape[0]):
            xr, yr = x[r], y[r]
            w = local_sgd(model, w, xr[None], yr[None], self.lr)
            v = prox_steps(model, v, anchor, xr, yr, lam=self.lam, lr=self.personal_lr,
                           steps=1)
        return w, v

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        x, y = view.batches["sgd"]
        w, v = self.local_update(model, view.server["global"], view.models["personalized"], x, y)
        return {"personalized": v}, {"global": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        """Mean ‖v_i − w‖² (how far personal models sit from the global one)."""
        return {"personal_gap_sq": float(sq_distance(state.models["personalized"],
                                                     state.models["global"]).mean())}
