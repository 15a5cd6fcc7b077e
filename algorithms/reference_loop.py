"""Plain per-client Python loops for FedAvg and pFedMe — the way peer libraries are written.

This module is the *oracle* for equivalence tests (same seed ⇒ same mini-batch indices and
client samples as the batched engine ⇒ the same numbers) and the *baseline* of the speed
benchmark (``benchmarks/bench_engine.py``).  It deliberately loops over clients one at a
time, each client holding its own ``[1, ...]`` parameters, with gradients by autograd
(``model.autograd_grad`` at ``N = 1``, as peer libraries call ``loss.backward()``), and
reuses only the model's forward and the algorithm's hyper-parameters — none of the batched
update code, and not the hand-written batched gradients.
"""

from __future__ import annotations

import torch

from algorithms.base import State, sample_clients
from algorithms.fedavg import FedAvg
from algorithms.pfedme import PFedMe


def _client(params, i):
    return {k: v[i:i + 1].clone() for k, v in params.items()}


def fedavg_round(alg: FedAvg, state: State, fed, model) -> State:
    """One FedAvg round, client by client."""
    gen = state.generator()
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen).tolist()
    w_global = state.models["global"]
    total = sum(int(fed.train.counts[i]) for i in chosen)
    new = {k: torch.zeros_like(v) for k, v in w_global.items()}
    for i in chosen:
        w = {k: v.clone() for k, v in w_global.items()}
        for r in range(alg.local_rounds):
            x, y = fed.train.gather(batches[r, i:i + 1])
            g, _ = model.autograd_grad(w, x, y)
            for k in w:
                w[k] = w[k] - alg.lr * g[k]
        share = int(fed.train.counts[i]) / total
        for k in new:
            new[k] = new[k] + share * w[k]
    return state.next({"global": new})


def pfedme_round(alg: PFedMe, state: State, fed, model) -> State:
    """One pFedMe round (Algorithm 1), client by client."""
    gen = state.generator()
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen).tolist()
    w_global = state.models["global"]
    thetas, locals_ = [], []
    for i in range(fed.num_clients):
        w_loc = {k: v.clone() for k, v in w_global.items()}
        theta = {k: v.clone() for k, v in w_global.items()}
        for r in range(alg.local_rounds):
            x, y = fed.train.gather(batches[r, i:i + 1])
            for _ in range(alg.inner_steps):
                g, _ = model.autograd_grad(theta, x, y)
                for k in theta:
                    theta[k] = theta[k] - alg.personal_lr * (
                        g[k] + alg.lam * (theta[k] - w_loc[k]) + alg.code_l2 * theta[k])
            for k in w_loc:
                w_loc[k] = w_loc[k] - alg.lr * alg.lam * (w_loc[k] - theta[k])
        thetas.append(theta)
        locals_.append(w_loc)
    if alg.aggregation == "weighted":
        weights = [float(fed.train.counts[i]) for i in chosen]
    else:
        weights = [1.0] * len(chosen)
    total = sum(weights)
    mean = {k: sum(wt / total * locals_[i][k] for wt, i in zip(weights, chosen)) for k in w_global}
    w_new = {k: (1 - alg.beta) * w_global[k] + alg.beta * mean[k] for k in w_global}
    stack = lambda ps: {k: torch.cat([p[k] for p in ps]) for k in ps[0]}  # noqa: E731
    return state.next({"global": w_new, "personalized": stack(thetas), "local": stack(locals_)})
