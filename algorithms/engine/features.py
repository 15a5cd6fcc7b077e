"""Feature extraction, per-class prototypes and feature statistics, all clients batched.

The feature-space methods (pFedFDA, FedProto, FedPAC) split a network into a *body* φ —
every layer but the last — and a *linear head* (the last layer, ``weight [N, D, C]``,
``bias [N, C]``): ``logits = z W + b`` with ``z = φ(x)`` the ``D``-dimensional features.
For :class:`~algorithms.engine.models.MLR` the body is empty and ``z = x`` (flattened).

* :func:`features` — ``z [N, B, D]`` for ``x [N, B, ...]`` (built-in MLR, MLP/DNN, CNN);
* :func:`loss_grad` — per-client gradients of ``CE(head(φ(x)), y) + penalty(z, y)``
  with respect to chosen keys (one autograd pass for all clients);
* :func:`all_rows_index` / :func:`valid_rows` — every training row of each participant as
  one padded ``[1, P, M]`` batch (a phase's ``batches`` entry: the engine, the per-client
  loop and Flower gather it like a mini-batch; padding repeats a client's last row; the
  counts travel in the payload, :func:`valid_rows` masks the padding);
* :func:`class_sums` — batched segment sums over classes: counts ``[N, C]`` and feature
  sums ``[N, C, D]`` (one ``bmm`` of the one-hot labels with the features, no loop over
  clients or classes); :func:`class_means` the prototypes; :func:`within_class_cov` the
  pooled within-class covariance ``[N, D, D]``.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from algorithms.engine.base import Params
from algorithms.engine.models import MLP, MLR, Model, _dense

Penalty = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def head_keys(model: Model) -> list[str]:
    """The names ``[weight, bias]`` of the last (linear) layer; a clear ``ValueError`` for a
    model whose body features this module cannot compute."""
    if not isinstance(model, (MLR, MLP)) and not callable(getattr(model, "features", None)):
        raise ValueError(f"feature-space algorithms need a built-in model with a linear last "
                         f"layer (mlr, dnn, mlp, cnn, cnn3, resnet18-gn), got "
                         f"{type(model).__name__}")
    return list(model.layers[-1])


def body_keys(model: Model) -> list[str]:
    return [k for layer in model.layers[:-1] for k in layer]


def inert_without_body(model: Model, why: dict[str, str]) -> dict[str, str]:
    """``why`` (``{hyper-parameter: reason}``) when ``model`` has no body — an MLR, whose
    features are its inputs (``z = x``), so a term acting on the features or a step on
    the body cannot change the result — else ``{}``: what an algorithm's
    ``inert_hyperparameters(model)`` returns (``pflt run`` prints a note for each)."""
    return dict(why) if not body_keys(model) else {}


def feature_dim(model: Model) -> int:
    """``D``: the input width of the last layer."""
    head_keys(model)
    if isinstance(model, MLR):
        return model.dim
    if isinstance(model, MLP):
        return model.widths[-2]
    return model.feature_dim


def features(model: Model, params: Params, x: torch.Tensor) -> torch.Tensor:
    """``z = φ(x)``: the input of the last layer, ``[N, B, D]`` (``params`` may hold the
    head too; it is not read).  The same ops as the model's forward up to its last layer."""
    head_keys(model)
    if isinstance(model, MLR):
        return x.flatten(2)
    if isinstance(model, MLP):
        h = x.flatten(2)
        for l in range(1, len(model.widths) - 1):
            h = torch.relu(_dense(h, params[f"fc{l}.weight"], params[f"fc{l}.bias"]))
        return h
    return model.features(params, x)


def linear_logits(z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``z W + b``: ``[N, B, D] × [N, D, C] + [N, C] → [N, B, C]`` (``[1, ...]`` heads
    broadcast over clients)."""
    return torch.matmul(z, weight) + bias.unsqueeze(1)


def loss_grad(model: Model, params: Params, keys, x: torch.Tensor, y: torch.Tensor, *,
              head: tuple[torch.Tensor, torch.Tensor] | None = None,
              penalty: Penalty | None = None) -> tuple[Params, torch.Tensor]:
    """Per-client gradients, for the parameters named ``keys``, of
    ``(1/B) Σ_b CE(z_b W + b, y_b) + penalty(z, y)`` (``penalty`` ``[N]``), and the losses.
    ``head = (W, b)`` replaces the model's own last layer (pFedFDA's generative head).
    The clients' parameters are independent, so one backward pass of the summed loss gives
    every client its own gradient (as :meth:`Model.autograd_grad`)."""
    keys = list(keys)
    with torch.enable_grad():
        leaves = {k: params[k].detach().requires_grad_(True) for k in keys}
        p = {**{k: v.detach() for k, v in params.items()}, **leaves}
        z = features(model, p, x)
        w, b = head if head is not None else (p[k] for k in head_keys(model))
        logits = linear_logits(z, w, b)
        loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)
        if penalty is not None:
            loss = loss + penalty(z, y)
        grads = torch.autograd.grad(loss.sum(), list(leaves.values())) if keys else ()
    return dict(zip(keys, grads)), loss.detach()


def all_rows_index(fed, clients: torch.Tensor) -> torch.Tensor:
    """Every training row of the ``clients`` as one padded batch ``[1, P, M]`` (``M`` the
    largest of their counts): column ``j`` is ``offset_j + 0 … count_j − 1``, then the last
    row repeated.  Strictly increasing where valid, constant in the padding."""
    clients = clients.to(fed.train.counts.device)
    counts, offsets = fed.train.counts[clients], fed.train.offsets[clients]
    m = int(counts.max()) if counts.numel() else 1
    pos = torch.arange(m, device=counts.device)
    last = (counts - 1).clamp(min=0)
    return (offsets[:, None] + torch.minimum(pos[None, :], last[:, None])).unsqueeze(0)


def valid_rows(counts: torch.Tensor, m: int) -> torch.Tensor:
    """``[P, M]``: True at the first ``counts[j]`` positions of column ``j`` of an
    :func:`all_rows_index` batch (the rest is padding).  The counts travel in the phase's
    payload (the clients see gathered rows, not indices)."""
    return torch.arange(m, device=counts.device)[None, :] < counts[:, None]


def all_rows_phase_parts(fed, clients: torch.Tensor) -> tuple[dict, dict]:
    """``(batches, payload)`` entries of a phase whose clients read all their training rows:
    ``{"rows": all_rows_index}`` and ``{"rows": counts [P]}``."""
    counts = fed.train.counts[clients.to(fed.train.counts.device)]
    return {"rows": all_rows_index(fed, clients)}, {"rows": counts}


def client_rows(view) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x [P, M, ...], y [P, M], valid [P, M])``: every training row of the participants
    of a phase built with :func:`all_rows_phase_parts`."""
    x, y = view.batches["rows"]
    x, y = x[0], y[0]
    return x, y, valid_rows(view.payload["rows"].to(y.device), y.shape[1])


def class_sums(z: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, num_classes: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched segment sums over classes: ``(counts [N, C], sums [N, C, D])`` of the
    features ``z [N, M, D]`` with labels ``y [N, M]`` over the positions where ``mask``
    ``[N, M]`` holds — ``onehotᵀ z`` as one ``bmm``."""
    onehot = F.one_hot(y, num_classes).to(z.dtype) * mask.unsqueeze(-1).to(z.dtype)
    return onehot.sum(1), torch.bmm(onehot.transpose(1, 2), z)


def class_counts(y: torch.Tensor, mask: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``[N, C]``: how many masked positions of each client have each label."""
    return (F.one_hot(y, num_classes) * mask.unsqueeze(-1)).sum(1)


def class_means(counts: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    """Prototypes ``sums / counts`` (``[..., C, D]``); zero for a class without samples."""
    return sums / counts.clamp(min=1).unsqueeze(-1)


def within_class_cov(z: torch.Tensor, y: torch.Tensor, mask: torch.Tensor,
                     means: torch.Tensor) -> torch.Tensor:
    """Pooled within-class covariance ``(1/n) Σ_s (z_s − μ_{y_s})(z_s − μ_{y_s})ᵀ`` over
    the masked positions, ``[N, D, D]`` (``means [N, C, D]``; ``n`` at least 1)."""
    centred = (z - torch.gather(means, 1, y.unsqueeze(-1).expand(*y.shape, z.shape[-1])))
    centred = centred * mask.unsqueeze(-1).to(z.dtype)
    n = mask.sum(1).clamp(min=1).to(z.dtype)
    return torch.bmm(centred.transpose(1, 2), centred) / n[:, None, None]
