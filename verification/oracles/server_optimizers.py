"""Oracles of the server optimisers: FedAvgM, FedAdagrad, FedYogi, FedAdam.

Written again from the papers, client by client: each sampled client runs FedAvg's R SGD
steps with autograd on its own ``[1, ...]`` copy; the server's optimiser is applied in
numpy, one flattened coordinate vector per model, from the update rules as printed —
Reddi et al., *Adaptive Federated Optimization*, ICLR 2021, Algorithm 2 (lines 9–14;
m_{−1} = 0, v_{−1} = τ² in the paper's reading, 0 in Flower's), and Hsu, Qi, Brown,
arXiv 1909.06335, §3 (u ← βu + Δ, x ← x + ηu).  Flower's FedAdam rate
η √(1 − β₂^{r+1}) / (1 − β₁^{r+1}) with r its 1-based server round.
"""

from __future__ import annotations

import numpy as np
import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise

REDDI = "Adaptive Federated Optimization (Reddi et al., ICLR 2021)"
HSU = "FedAvgM (Hsu, Qi, Brown, arXiv 1909.06335)"
SMALL = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


def _vec(params) -> np.ndarray:
    return o.flat(params).detach().numpy().astype(np.float64)


def _unflat(vector: np.ndarray, like) -> dict:
    out, at = {}, 0
    for k, v in like.items():
        out[k] = torch.from_numpy(vector[at:at + v.numel()].copy()).reshape(v.shape).to(v.dtype)
        at += v.numel()
    return out


def _delta(alg, state, fed, model) -> np.ndarray:
    """Δ_t = mean_S (x_i − x_t): the sampled clients' SGD steps, one at a time."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    x = state.models["global"]
    ends = [_vec(o.sgd(model, o.copy(x), fed, batches, range(alg.local_rounds), i, alg.lr))
            for i in chosen]
    w = [float(fed.train.counts[i]) if alg.aggregation == "weighted" else 1.0 for i in chosen]
    x0 = _vec(x)
    return sum(wi * (e - x0) for wi, e in zip(w, ends)) / sum(w)


def fedavgm_round(alg, state, fed, model):
    """u ← β u + Δ_t; x ← x + η u (u_{−1} = 0)."""
    x = state.models["global"]
    u = alg.momentum * _vec(state.models["momentum_buffer"]) + _delta(alg, state, fed, model)
    return state.next({"global": _unflat(_vec(x) + alg.server_lr * u, x),
                       "momentum_buffer": _unflat(u, x)})


def adaptive_round(alg, state, fed, model):
    """Algorithm 2, lines 10–14, for FedAdagrad / FedYogi / FedAdam (``alg.rule``)."""
    x = state.models["global"]
    d = _delta(alg, state, fed, model)
    m = alg.beta1 * _vec(state.models["first_moment"]) + (1.0 - alg.beta1) * d
    v = _vec(state.models["second_moment"])
    if alg.rule == "adagrad":
        v = v + d ** 2
    elif alg.rule == "yogi":
        v = v - (1.0 - alg.beta2) * d ** 2 * np.sign(v - d ** 2)
    else:
        v = alg.beta2 * v + (1.0 - alg.beta2) * d ** 2
    eta = alg.server_lr
    if alg.rule == "adam" and alg.reading == "flower":
        r = state.round + 1
        eta = eta * np.sqrt(1.0 - alg.beta2 ** (r + 1.0)) / (1.0 - alg.beta1 ** (r + 1.0))
    new_x = _vec(x) + eta * m / (np.sqrt(v) + alg.tau)
    return state.next({"global": _unflat(new_x, x), "first_moment": _unflat(m, x),
                       "second_moment": _unflat(v, x)})


ADAPTIVE = models_of("global", "first_moment", "second_moment")
MOMENTUM = models_of("global", "momentum_buffer")

register_oracle(Oracle(
    "fedavgm", HSU, "§3, server momentum",
    algorithm("fedavgm", server_lr=0.9, momentum=0.7, aggregation="weighted", **SMALL),
    o.default_setting, stepwise(fedavgm_round, MOMENTUM), MOMENTUM, rounds=3))

register_oracle(Oracle(
    "fedadagrad", REDDI, "Algorithm 2 (FedAdagrad)",
    algorithm("fedadagrad", server_lr=0.05, beta1=0.8, tau=0.01, **SMALL),
    o.default_setting, stepwise(adaptive_round, ADAPTIVE), ADAPTIVE, rounds=3))

register_oracle(Oracle(
    "fedyogi", REDDI, "Algorithm 2 (FedYogi)",
    algorithm("fedyogi", server_lr=0.05, beta1=0.8, beta2=0.9, tau=0.01, **SMALL),
    o.default_setting, stepwise(adaptive_round, ADAPTIVE), ADAPTIVE, rounds=3))

register_oracle(Oracle(
    "fedadam", REDDI, "Algorithm 2 (FedAdam), Flower's bias-corrected reading",
    algorithm("fedadam", server_lr=0.05, beta1=0.8, beta2=0.9, tau=0.01, reading="flower",
              aggregation="weighted", **SMALL),
    o.default_setting, stepwise(adaptive_round, ADAPTIVE), ADAPTIVE, rounds=3))
