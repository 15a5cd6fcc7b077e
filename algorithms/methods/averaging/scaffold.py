"""SCAFFOLD — S. P. Karimireddy, S. Kale, M. Mohri, S. J. Reddi, S. U. Stich, A. T. Suresh,
*SCAFFOLD: Stochastic Controlled Averaging for Federated Learning*, ICML 2020
(arXiv 1910.06378), Algorithm 1 with option II.

State: the server model ``x`` and server control variate ``c`` (server), one control
variate ``c_i`` per client (kept on the client); ``c = c_i = 0`` initially.  Round ``t``
(``S`` clients sampled uniformly):

* client ``i``: ``y_i ← x``; ``K`` steps ``y_i ← y_i − η_l (g_i(y_i) − c_i + c)`` (one
  mini-batch each); option II ``c_i⁺ = c_i − c + (x − y_i)/(K η_l)``; uploads
  ``(Δy_i, Δc_i) = (y_i − x, c_i⁺ − c_i)`` and keeps ``c_i ← c_i⁺``;
* server: ``x ← x + η_g · mean_{i∈S} Δy_i`` and ``c ← c + (1/N) Σ_{i∈S} Δc_i``.

The model step is computed as ``x ← (1 − η_g) x + η_g · mean_{i∈S} y_i`` (the same value in
exact arithmetic; the client uploads ``y_i`` itself), so with η_g = 1 it *is* the mean of
the local models.  Reductions (tested): with zero control variates the local steps are
FedAvg's (McMahan et al., AISTATS 2017) — ``g − 0 + 0`` is ``g`` exactly — so the first
round (any K), and any round from a state whose control variates are zero, gives FedAvg's
model bit for bit with η_g = 1 and ``aggregation = "weighted"``; with K = 1, option II
makes ``c_i⁺`` client i's mini-batch gradient at ``x`` (to rounding).

Departures: the paper averages ``Δy_i`` uniformly over the sampled clients (the default,
``aggregation = "uniform"``); ``"weighted"`` uses the sample counts, as FedAvg does here.
The mean ``mean_{i∈S}`` is over the clients that uploaded (a failed client under Flower is
left out of both sums; its ``c_i`` then is not updated on the server's side either).
Paper defaults: η_g = 1, option II.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, one_of, register,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from pfl_theory.validation import positive, positive_int


def controlled_sgd(model, y: Params, c_i: Params, c: Params, x, labels, lr: float) -> Params:
    """SCAFFOLD's local steps (Algorithm 1, line 10): one per mini-batch ``x[K, N, B, ...]``,
    ``y ← y − η_l (g_i(y) − c_i + c)``; ``c`` may be ``[1, ...]``."""
    for r in range(x.shape[0]):
        g, _ = model.grad(y, x[r], labels[r])
        y = {k: y[k] - lr * (g[k] - c_i[k] + c[k]) for k in y}
    return y


def option_two(c_i: Params, c: Params, x: Params, y: Params, steps: int, lr: float) -> Params:
    """Option II of Algorithm 1 (line 12): ``c_i⁺ = c_i − c + (x − y_i)/(K η_l)``."""
    return {k: c_i[k] - c[k] + (x[k] - y[k]) / (steps * lr) for k in c_i}


@register("scaffold")
@dataclass(frozen=True)
class Scaffold(Algorithm):
    """SCAFFOLD (Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, ICML 2020), Algorithm 1,
    option II.  Paper symbols: η_l = ``lr``, η_g = ``global_lr``, K = ``local_rounds``,
    |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("client_control",)

    lr: float = hp(0.02, "local step size η_l", check=positive, symbol="η_l")
    global_lr: float = hp(1.0, "global step size η_g (x ← x + η_g·mean Δy)", check=positive,
                          symbol="η_g")
    local_rounds: int = hp(20, "local steps K per round (one mini-batch each)",
                           check=positive_int, symbol="K")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    aggregation: str = hp("uniform", "mean of the Δy_i: 'uniform' (paper) or 'weighted' by "
                          "sample counts (FedAvg's)", check=one_of("uniform", "weighted"),
                          symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        x = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        zero = {k: torch.zeros_like(v) for k, v in x.items()}
        return State(0, seed, {"global": x, "control": zero,
                               "client_control": broadcast(zero, fed.num_clients)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """K controlled steps from ``x``; option II; keeps ``c_i⁺``, uploads ``y_i``, ``Δc_i``."""
        xb, yb = view.batches["sgd"]
        x, c, c_i = view.server["global"], view.server["control"], view.models["client_control"]
        y = controlled_sgd(model, broadcast(x, xb.shape[1]), c_i, c, xb, yb, self.lr)
        c_new = option_two(c_i, c, x, y, self.local_rounds, self.lr)
        delta = {k: c_new[k] - c_i[k] for k in c_new}
        return {"client_control": c_new}, {"model": y, "delta_control": delta}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``x ← (1 − η_g) x + η_g mean_S y_i``; ``c ← c + Σ_S Δc_i / N``."""
        chosen = phase.upload_clients().to(fed.device)
        counts = fed.train.counts[chosen]
        weights = counts if self.aggregation == "weighted" else torch.ones_like(counts)
        mean_y = weighted_mean(uploads["model"], weights)
        x, c = state.models["global"], state.models["control"]
        new_x = {k: (1 - self.global_lr) * x[k] + self.global_lr * mean_y[k] for k in x}
        new_c = {k: c[k] + uploads["delta_control"][k].sum(0, keepdim=True) / fed.num_clients
                 for k in c}
        return with_server(state, {"global": new_x, "control": new_c}), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        """‖c‖ and the mean ‖c_i − c‖ (how much the client drift corrections differ)."""
        c, ci = state.models["control"], state.models["client_control"]
        norm = sum(float((v ** 2).sum()) for v in c.values()) ** 0.5
        spread = sum(((ci[k] - c[k]) ** 2).flatten(1).sum(1) for k in c).sqrt().mean()
        return {"control_norm": norm, "client_control_spread": float(spread)}
