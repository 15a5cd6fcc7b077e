"""Parameter-dict helpers for methods that split a network into a shared body and a personal
head (or any named subset of layers): FedRep/FedPer/LG-FedAvg, FedBABU, FedAvg+FT, FedBN,
FedRoD, FedALA, FedPAC, pFedFDA, PLGU-GRep and PPFE all use them.

A network is an ordered list of layers (``model.layers``); ``head_layers = k`` names the last
``k`` layers the *head* ψ, the others the *body* φ. Parameters are dicts of batched tensors
``[N, ...]`` (one row per client); ``[1, ...]`` rows are broadcast.
"""

from __future__ import annotations

from typing import Callable

import torch

from algorithms.engine.base import Params, weighted_mean
from pfl_theory.validation import positive_int

Project = Callable[[Params], Params]



def split_keys(model, head_layers: int) -> tuple[list[str], list[str]]:
    """``(body keys, head keys)``: the head is the last ``head_layers`` layers of ``model``."""
    k = positive_int("head_layers", head_layers)
    if k > len(model.layers):
        raise ValueError(f"head_layers={k} exceeds the model's {len(model.layers)} layers")
    body = [name for layer in model.layers[:len(model.layers) - k] for name in layer]
    head = [name for layer in model.layers[len(model.layers) - k:] for name in layer]
    return body, head


def head_span(model) -> int:
    """The most trailing layers of ``model`` a progressive head may span: the model's
    ``head_span`` where it sets one (PPFE's CNN: its dense layers), else every layer."""
    return int(getattr(model, "head_span", None) or len(model.layers))


def subset(params: Params, keys) -> Params:
    return {k: params[k] for k in keys}


def merge(*parts: Params, n: int | None = None) -> Params:
    """One parameter dict from disjoint parts; ``[1, ...]`` parts are broadcast to ``n`` rows."""
    out: Params = {}
    for part in parts:
        for k, v in part.items():
            out[k] = v.expand(n, *v.shape[1:]) if n is not None and v.shape[0] == 1 else v
    return out


def partial_sgd(model, params: Params, keys, x: torch.Tensor, y: torch.Tensor, lr: float,
                project: Project | None = None) -> Params:
    """SGD on the parameters named ``keys`` only (the others fixed), one step per mini-batch
    ``x[R, N, B, ...]``: ``θ_k ← θ_k − lr ∇_k f̃_i(θ)``; ``project`` (optional) is applied
    after every step (PPFE's complexity constraint on personalized layers)."""
    keys = set(keys)
    for r in range(x.shape[0]):
        if not keys:
            break
        g, _ = model.grad(params, x[r], y[r])
        params = {k: v - lr * g[k] if k in keys else v for k, v in params.items()}
        if project is not None:
            params = project(params)
    return params


def fedrep_update(model, params: Params, head_keys, body_keys, x, y, *, head_steps: int,
                  lr: float, body_lr: float | None = None,
                  project: Project | None = None) -> Params:
    """FedRep's local update (Collins et al. 2021, Alg. 1): the first ``head_steps``
    mini-batches of ``x[R, N, B, ...]`` update the head with the body fixed, the remaining
    ones update the body with the head fixed."""
    params = partial_sgd(model, params, head_keys, x[:head_steps], y[:head_steps], lr, project)
    return partial_sgd(model, params, body_keys, x[head_steps:], y[head_steps:],
                       lr if body_lr is None else body_lr)


def aggregate(params: Params, counts: torch.Tensor, rule: str) -> Params:
    """Server mean over the rows of ``params`` → ``[1, ...]`` (``rule``: uniform|weighted)."""
    if not params:
        return {}
    w = counts if rule == "weighted" else torch.ones_like(counts)
    return weighted_mean(params, w)


def param_count(params: Params) -> int:
    """Scalar parameters of ONE model (per row) in ``params``."""
    return int(sum(v[0].numel() for v in params.values()))


def check_aggregation(rule: str) -> None:
    if rule not in ("uniform", "weighted"):
        raise ValueError(f"aggregation must be 'uniform' or 'weighted', got {rule!r}")
