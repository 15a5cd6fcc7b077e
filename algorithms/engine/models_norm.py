"""Training steps for batched networks with batch normalisation (every client its own
BatchNorm statistics).  The network, :class:`~algorithms.engine.models.BatchNormMLP`
(``build_model("mlp-bn", …)``), lives in :mod:`algorithms.engine.models` with the other models (a
module of its own here would import that one and be imported by its ``build_model``) and is
re-exported here.  :func:`algorithms.engine.steps.local_sgd` runs :func:`buffered_sgd` on a model
with ``buffers``: FedAvg, Local and FedBN move the statistics; the other algorithms' steps
do not, and ``pflt run`` refuses ``--model mlp-bn`` for them.
"""

from __future__ import annotations

import torch

from algorithms.engine.models import BatchNormMLP, Params

__all__ = ["BatchNormMLP", "has_buffers", "buffered_sgd"]


def has_buffers(model) -> bool:
    """Whether ``model`` keeps statistics that a training step moves (BatchNorm)."""
    return bool(getattr(model, "buffers", ()))


def buffered_sgd(model, params: Params, x: torch.Tensor, y: torch.Tensor, lr: float) -> Params:
    """SGD with batch-normalised training steps: one step per mini-batch ``x[R, N, B, ...]``,
    ``θ ← θ − lr ∇f̃_i(θ)`` on the trained entries (batch statistics in the forward pass) and
    the buffers moved by the same forward pass (what ``torch.nn.BatchNorm1d`` does in
    training mode, followed by an optimiser step)."""
    for r in range(x.shape[0]):
        g, _, moved = model.train_grad(params, x[r], y[r])
        params = {k: moved[k] if k in moved else params[k] - lr * g[k] for k in params}
    return params
