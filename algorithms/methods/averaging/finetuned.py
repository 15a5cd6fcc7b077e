"""Global training + local fine-tuning baselines: FedBABU and FedAvg+FT.

* **FedBABU** — J. Oh, S. Kim, S.-Y. Yun, *FedBABU: Toward Enhanced Representation for
  Federated Image Classification*, ICLR 2022 (arXiv 2106.06042).  The head (last
  ``head_layers`` layers) is drawn at random once and **never trained** during federated
  training; each sampled client runs ``local_rounds`` SGD steps on the body only,
  ``φ_i ← φ_i − η ∇_φ f_i(φ_i, ψ^0)``, and the server averages the bodies
  ``φ^{t+1} = mean_{i∈S^t} φ_i``.  Personalization at evaluation: every client fine-tunes the
  global model for ``finetune_steps`` SGD steps (rate ``finetune_lr``) on its own training
  data.  ``finetune_part="head"`` (default, as in the toolkit brief) updates only the head;
  ``"full"`` updates body and head (the paper's main personalization fine-tunes the whole
  model — the choice is recorded, both are selectable).
* **FedAvg+FT** — FedAvg (McMahan et al., AISTATS 2017; see :mod:`algorithms.methods.averaging.fedavg`,
  identical rounds and random streams) followed, for the evaluated personalized model, by
  ``finetune_steps`` local SGD steps from the current global model (``finetune_part="full"``
  by default; ``"head"`` fine-tunes only the last ``head_layers`` layers) — the FedAvg+FT
  baseline of the PPFE paper's Table 1.

Defaults ``finetune_steps=20``, ``finetune_lr=0.05`` are toolkit choices (the papers fine-tune
for a few local epochs at the training rate).  Fine-tuning is recomputed from the current global model after every round, for all N
clients (mini-batches from the round's random stream 1, so the training trajectory is the
same as without fine-tuning); the fine-tuned models are never sent back.

Evaluated models: ``personalized`` = the fine-tuned model of each client, ``global`` = the
global model (FedBABU: global body + its random head; FedAvg+FT: the FedAvg model).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, register,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, everyone, train_phase, with_server
from algorithms.engine.heads import (aggregate, check_aggregation, merge, param_count,
                                  partial_sgd, split_keys, subset)
from algorithms.methods.averaging.fedavg import FedAvg
from pfl_theory.validation import positive, positive_int


def _check_part(part: str) -> None:
    if part not in ("head", "full"):
        raise ValueError(f"finetune_part must be 'head' or 'full', got {part!r}")


@dataclass(frozen=True)
class _FineTuned(Algorithm):
    """Global training, then every client fine-tunes the new global model (a second
    exchange of the round, ``finetune``, on mini-batches of stream 1).  Every client
    fine-tunes, so the engine gathers one step's mini-batch at a time (contract.LazyRows)."""

    client_models = ("personalized",)
    lazy_batches = True

    finetune_steps: int = hp(20, "local fine-tuning SGD steps for the evaluated personalized model",
                             symbol="—")
    finetune_lr: float = hp(0.05, "learning rate of the fine-tuning steps", symbol="—")

    def _check_finetune(self):
        positive_int("finetune_steps", self.finetune_steps)
        positive("finetune_lr", self.finetune_lr)
        _check_part(self.finetune_part)

    def finetune_phase(self, state: State, fed) -> Phase:
        batches = fed.sample_batches(self.finetune_steps, self.batch_size, state.generator(1))
        return Phase("finetune", everyone(fed), {"finetune": batches},
                     uploaders=everyone(fed)[:0])

    def finetune(self, model, global_params, view) -> dict:
        """Each client's copy of ``global_params`` ``[1, ...]`` after ``finetune_steps`` SGD
        steps (rate ``finetune_lr``) on the head or all parameters, own training data."""
        body, head = split_keys(model, self.head_layers)
        keys = head if self.finetune_part == "head" else list(global_params)
        x, y = view.batches["finetune"]
        return partial_sgd(model, broadcast(global_params, x.shape[1]), keys, x, y,
                           self.finetune_lr)


@register("fedbabu")
@dataclass(frozen=True)
class FedBABU(_FineTuned):
    """FedBABU (Oh, Kim, Yun, ICLR 2022, arXiv 2106.06042): η = ``lr`` for the body, R =
    ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``; fine-tuning options are
    toolkit choices (no paper symbol)."""
    lr: float = local_lr_hp()
    local_rounds: int = hp(10, "local SGD steps R per round on the body (one mini-batch each)",
                           check=positive_int, symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    head_layers: int = hp(1, "number of last layers in the (frozen, random) head",
                          check=positive_int, symbol="—")
    aggregation: str = hp("uniform", "server mean: 'uniform' (papers) or 'weighted' by samples",
                          symbol="—")
    finetune_part: str = hp("head", "'head' or 'full': what the evaluation fine-tuning updates",
                            symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        check_aggregation(self.aggregation)
        self._check_finetune()

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        body, head = split_keys(model, self.head_layers)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"body": subset(w, body), "head": subset(w, head),
                               "personalized": broadcast(w, fed.num_clients)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """``train``: body SGD steps with the random head fixed, uploads the body;
        ``finetune``: the evaluated personalized model from the new global model."""
        body, head = view.server["body"], view.server["head"]
        if phase.name == "finetune":
            return {"personalized": self.finetune(model, merge(body, head), view)}, {}
        x, y = view.batches["sgd"]
        params = partial_sgd(model, merge(body, head, n=x.shape[1]), list(body), x, y, self.lr)
        return {}, {"body": subset(params, body)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "finetune":
            return state, None
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        state = with_server(state, {"body": aggregate(uploads["body"], counts, self.aggregation)})
        return state, self.finetune_phase(state, fed)

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"],
                "global": merge(state.models["body"], state.models["head"])}

    def diagnostics(self, state: State, fed, model) -> dict:
        per_round = 2 * self.clients_per_round * param_count(state.models["body"])
        return {"comm_params_per_round": float(per_round),
                "comm_params_total": float(per_round * state.round)}


@register("fedavg-ft")
@dataclass(frozen=True)
class FedAvgFT(_FineTuned):
    """FedAvg+FT: FedAvg (McMahan et al., AISTATS 2017; η = ``lr``, R = ``local_rounds``,
    |D| = ``batch_size``, S = ``clients_per_round``) with local fine-tuning, the baseline of
    the PPFE paper's Table 1 (Emrani, Najafi, Motahari, arXiv 2602.14244)."""
    lr: float = hp(0.02, "local SGD learning rate η", symbol="η")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)", symbol="R")
    batch_size: int = hp(20, "mini-batch size |D|", symbol="|D|")
    clients_per_round: int = hp(10, "clients S sampled per round", symbol="S")
    head_layers: int = hp(1, "layers fine-tuned when finetune_part='head'", check=positive_int,
                          symbol="—")
    finetune_part: str = hp("full", "'full' or 'head': what the evaluation fine-tuning updates",
                            symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        self._check_finetune()
        self.fedavg  # validates lr, local_rounds, batch_size, clients_per_round

    @property
    def fedavg(self) -> FedAvg:
        return FedAvg(lr=self.lr, local_rounds=self.local_rounds, batch_size=self.batch_size,
                      clients_per_round=self.clients_per_round)

    def init(self, fed, model, seed: int) -> State:
        state = self.fedavg.init(fed, model, seed)
        split_keys(model, self.head_layers)  # validates head_layers against the model
        return state.replace(models={**state.models, "personalized": broadcast(
            state.models["global"], fed.num_clients)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return self.fedavg.first_phase(state, fed, model)

    def client_update(self, phase, model, view):
        """``train``: FedAvg's client update; ``finetune``: fine-tune the new global model."""
        if phase.name == "finetune":
            return {"personalized": self.finetune(model, view.server["global"], view)}, {}
        return self.fedavg.client_update(phase, model, view)

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "finetune":
            return state, None
        state, _ = self.fedavg.server_aggregate(phase, state, uploads, fed, model)
        return state, self.finetune_phase(state, fed)

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        per_round = 2 * self.clients_per_round * param_count(state.models["global"])
        return {"comm_params_per_round": float(per_round),
                "comm_params_total": float(per_round * state.round)}
