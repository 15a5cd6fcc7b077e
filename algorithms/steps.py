"""Local-training building blocks shared by the algorithms (all clients batched)."""

from __future__ import annotations

import torch

from algorithms.base import Params
from algorithms.models import Model


def local_sgd(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor,
              lr: float) -> Params:
    """Plain SGD: one step per mini-batch; ``x[R, N, B, ...]``, ``y[R, N, B]``."""
    for r in range(x.shape[0]):
        g, _ = model.grad(params, x[r], y[r])
        params = {k: params[k] - lr * g[k] for k in params}
    return params


def prox_steps(model: Model, theta: Params, anchor: Params, x: torch.Tensor,
               y: torch.Tensor, *, lam: float, lr: float, steps: int,
               extra_l2: float = 0.0) -> Params:
    """``steps`` gradient steps on ``f̃_i(θ; D) + λ/2 ‖θ − anchor_i‖² (+ extra_l2/2 ‖θ‖²)``
    on the *same* mini-batch ``x[N, B, ...]`` (pFedMe eq. 7; CGPFL's personalized step).

    ``θ ← θ − lr (∇f̃_i(θ) + λ(θ − anchor) + extra_l2 θ)``, evaluated as
    ``(1 − lr(λ + extra_l2)) θ + lr λ anchor − lr ∇f̃_i(θ)`` (three tensor ops instead of five)."""
    keep = 1.0 - lr * (lam + extra_l2)
    for _ in range(steps):
        g, _ = model.grad(theta, x, y)
        theta = {k: torch.add(theta[k] * keep, anchor[k], alpha=lr * lam).sub_(g[k], alpha=lr)
                 for k in theta}
    return theta
