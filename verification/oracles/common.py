"""Oracle-side building blocks: one client at a time, float64, autograd — nothing here calls
a method's ``client_update`` / ``server_aggregate`` or the engine's step helpers
(``local_sgd``, ``partial_sgd``, ``prox_steps``, ``weighted_mean``, ``aggregate``).

A client's parameters are a dict of ``[1, ...]`` tensors (one row), so the model's
``forward`` runs on it unchanged; :func:`grad` differentiates the mean cross-entropy of one
mini-batch with autograd.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from algorithms.engine.base import sample_clients
from synthetic.permuted_labels import permuted_label_federation

Params = dict[str, torch.Tensor]

#: the default oracle setting: 6 clients, 4 classes (3 per client), dimension 6
CLASSES = 4
DIM = 6


def default_setting(seed: int, *, hidden: int | tuple[int, ...] = 5, num_clients: int = 6):
    """``(federation, model)``: a permuted-label federation (float64, 40-60 samples a
    client) and an MLP with ``hidden`` units (ReLU)."""
    from algorithms.engine.models import MLP

    fed = permuted_label_federation(num_clients=num_clients, num_clusters=4,
                                    classes_per_client=3, dim=DIM, size_range=(40, 60),
                                    separation=2.0, noise=0.7, seed=1 + seed, device="cpu",
                                    dtype=torch.float64)
    widths = (hidden,) if isinstance(hidden, int) else tuple(hidden)
    return fed, MLP(DIM, CLASSES, hidden=widths)


def row(params: Params, i: int) -> Params:
    """Client ``i``'s row of batched parameters ``[N, ...]`` as ``[1, ...]`` copies."""
    return {k: v[i:i + 1].clone() for k, v in params.items()}


def copy(params: Params) -> Params:
    return {k: v.clone() for k, v in params.items()}


def batch(fed, batches: torch.Tensor, r: int, i: int):
    """Client ``i``'s ``r``-th mini-batch ``(x [1, B, ...], y [1, B])`` of the indices
    ``batches [R, N, B]`` (every client's columns)."""
    return fed.train.gather(batches[r, i:i + 1])


def flat(params: Params) -> torch.Tensor:
    """One model's parameters (any leading ``[1, ...]`` included) as one vector, in the
    dict's key order."""
    return torch.cat([v.reshape(-1) for v in params.values()])


def loss(model, params: Params, x, y) -> torch.Tensor:
    """Mean cross-entropy of one client's mini-batch (``x [1, B, ...]``), plus
    ``l2/2 Σ‖W‖²`` over the weight matrices when the model carries ``l2 > 0`` (the models'
    documented ℓ2 term, biases not regularised: algorithms/engine/models.py)."""
    value = F.cross_entropy(model.forward(params, x)[0], y[0])
    l2 = float(getattr(model, "l2", 0.0) or 0.0)
    if l2 > 0:
        value = value + 0.5 * l2 * sum((v[0] ** 2).sum() for k, v in params.items()
                                       if k.endswith("weight"))
    return value


def grad(model, params: Params, x, y, keys=None, loss_fn=None) -> Params:
    """Autograd gradient of ``loss_fn(params)`` (default: :func:`loss` on ``(x, y)``) with
    respect to ``keys`` (default: all)."""
    keys = list(params) if keys is None else list(keys)
    with torch.enable_grad():
        leaves = {k: v.detach().requires_grad_(k in keys) for k, v in params.items()}
        value = loss(model, leaves, x, y) if loss_fn is None else loss_fn(leaves)
        gs = torch.autograd.grad(value, [leaves[k] for k in keys])
    return dict(zip(keys, gs))


def sgd(model, params: Params, fed, batches, steps, i: int, lr: float, keys=None) -> Params:
    """SGD on client ``i`` over the mini-batches ``steps`` (indices into ``batches``):
    ``θ_k ← θ_k − lr ∇_k f̃_i(θ)`` for ``k`` in ``keys`` (default all)."""
    for r in steps:
        x, y = batch(fed, batches, r, i)
        g = grad(model, params, x, y, keys)
        params = {k: (v - lr * g[k]).detach() if k in g else v for k, v in params.items()}
    return params


def mean(models: list[Params], weights=None) -> Params:
    """``Σ w_j θ_j / Σ w_j`` by a Python loop over the list (uniform without weights)."""
    weights = [1.0] * len(models) if weights is None else [float(w) for w in weights]
    total = sum(weights)
    out = {k: torch.zeros_like(v) for k, v in models[0].items()}
    for w, m in zip(weights, models):
        for k in out:
            out[k] = out[k] + (w / total) * m[k]
    return out


def draws(state, fed, steps: int, batch_size: int, clients_per_round: int, stream: int = 0):
    """The round's draws in FedAvg's order on ``stream``: every client's mini-batch indices
    ``[steps, N, B]``, then the sampled clients (a list)."""
    gen = state.generator(stream)
    batches = fed.sample_batches(steps, batch_size, gen)
    chosen = sample_clients(fed.num_clients, clients_per_round, gen).tolist()
    return batches, chosen
