"""Per-client execution of the algorithm contract, and plain per-client loops for FedAvg and
pFedMe — the way peer libraries are written.

* :func:`client_by_client_round` runs round ``t`` of ANY registered algorithm one client at a
  time: the same ``first_phase`` / ``client_update`` / ``server_aggregate`` functions the
  batched engine (:func:`algorithms.engine.contract.engine_round`) and the Flower adapter run, each
  client seeing only its own rows and its own data (:func:`~algorithms.engine.contract.client_federation`),
  uploads stacked in ascending client order.  It equals the engine up to the rounding of
  batched (N rows) vs single-row kernels, which is what the Flower adapter relies on.
* :func:`fedavg_round` / :func:`pfedme_round` are the *oracle* for equivalence tests (same
  seed ⇒ same mini-batch indices and client samples as the batched engine ⇒ the same
  numbers) and the *baseline* of the speed benchmark (``benchmarks/bench_engine.py``).  They
  deliberately loop over clients one at a time, each client holding its own ``[1, ...]``
  parameters, with gradients by autograd (``model.autograd_grad`` at ``N = 1``, as peer
  libraries call ``loss.backward()``), and reuse only the model's forward and the
  algorithm's hyper-parameters — none of the contract's update code, and not the
  hand-written batched gradients.
"""

from __future__ import annotations

import dataclasses

import torch

from algorithms.engine.base import State, sample_clients
from algorithms.engine.contract import (client_federation, engine_view, scatter_client_state,
                                 stack_trees)
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.pfedme import PFedMe


def client_by_client_round(alg, state: State, fed, model) -> State:
    """Round ``t`` of ``alg`` with every client's update run on its own (N = 1)."""
    phase = alg.first_phase(state, fed, model)
    while phase is not None:
        kept, uploads = [], []
        uploaders = set(phase.upload_clients().tolist())
        for i in phase.clients.tolist():
            mine = phase.only([i])
            own = client_federation(fed, i)
            view = dataclasses.replace(engine_view(alg, state, fed, mine), train=own.train,
                                       test=own.test)
            rows, upload = alg.client_update(mine, model, view)
            kept.append(rows)
            if i in uploaders:
                uploads.append(upload)
        state = scatter_client_state(alg, state, phase.clients, stack_trees(kept))
        state, phase = alg.server_aggregate(phase, state, stack_trees(uploads), fed, model)
    return state.replace(round=state.round + 1)


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
