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
* **FedAvg+FT** — FedAvg (McMahan et al., AISTATS 2017; see :mod:`algorithms.fedavg`,
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

from algorithms.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, sample_clients,
                             validate_hyperparameters)
from algorithms.decoupled import (aggregate, check_aggregation, merge, param_count,
                                  partial_sgd, split_keys, subset)
from algorithms.fedavg import FedAvg
from pfl_theory.validation import positive, positive_int


def _check_part(part: str) -> None:
    if part not in ("head", "full"):
        raise ValueError(f"finetune_part must be 'head' or 'full', got {part!r}")


def finetune(model, global_params, fed, gen, *, steps: int, batch_size: int, lr: float,
             keys) -> dict:
    """Every client's copy of ``global_params`` ``[1, ...]`` after ``steps`` SGD steps on
    the parameters ``keys`` (own training data, uniform mini-batches from ``gen``)."""
    batches = fed.sample_batches(steps, batch_size, gen)
    x, y = fed.train.gather(batches)
    return partial_sgd(model, broadcast(global_params, fed.num_clients), keys, x, y, lr)


@dataclass(frozen=True)
class _FineTuned:
    finetune_steps: int = hp(20, "local fine-tuning SGD steps for the evaluated personalized model")
    finetune_lr: float = hp(0.05, "learning rate of the fine-tuning steps")

    def _check_finetune(self):
        positive_int("finetune_steps", self.finetune_steps)
        positive("finetune_lr", self.finetune_lr)
        _check_part(self.finetune_part)

    def _finetuned(self, model, global_params, fed, state: State):
        body, head = split_keys(model, self.head_layers)
        keys = head if self.finetune_part == "head" else list(global_params)
        return finetune(model, global_params, fed, state.generator(1), steps=self.finetune_steps,
                        batch_size=self.batch_size, lr=self.finetune_lr, keys=keys)


@register("fedbabu")
@dataclass(frozen=True)
class FedBABU(_FineTuned):
    lr: float = hp(0.02, "local SGD learning rate η", check=positive)
    local_rounds: int = hp(10, "local SGD steps R per round on the body (one mini-batch each)",
                           check=positive_int)
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    head_layers: int = hp(1, "number of last layers in the (frozen, random) head",
                          check=positive_int)
    aggregation: str = hp("uniform", "server mean: 'uniform' (papers) or 'weighted' by samples")
    finetune_part: str = hp("head", "'head' or 'full': what the evaluation fine-tuning updates")

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

    def round(self, state: State, fed, model) -> State:
        gen = state.generator()
        batches = fed.sample_batches(self.local_rounds, self.batch_size, gen)
        chosen = sample_clients(fed.num_clients, self.clients_per_round, gen).to(fed.device)
        x, y = fed.train.gather(batches[:, chosen])
        body, head = state.models["body"], state.models["head"]
        params = partial_sgd(model, merge(body, head, n=chosen.numel()), list(body), x, y, self.lr)
        new_body = aggregate(subset(params, body), fed.train.counts[chosen], self.aggregation)
        personalized = self._finetuned(model, merge(new_body, head), fed, state)
        return state.next({"body": new_body, "head": head, "personalized": personalized})

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
    lr: float = hp(0.02, "local SGD learning rate η")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)")
    batch_size: int = hp(20, "mini-batch size |D|")
    clients_per_round: int = hp(10, "clients S sampled per round")
    head_layers: int = hp(1, "layers fine-tuned when finetune_part='head'", check=positive_int)
    finetune_part: str = hp("full", "'full' or 'head': what the evaluation fine-tuning updates")

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

    def round(self, state: State, fed, model) -> State:
        nxt = self.fedavg.round(State(state.round, state.seed, {"global": state.models["global"]},
                                      state.tensors), fed, model)
        g = nxt.models["global"]
        return nxt.replace(models={"global": g, "personalized": self._finetuned(model, g, fed, state)})

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        per_round = 2 * self.clients_per_round * param_count(state.models["global"])
        return {"comm_params_per_round": float(per_round),
                "comm_params_total": float(per_round * state.round)}
