"""The batched model interface (:class:`Model`) and the helpers every built-in network
uses: the dense layer ``_dense`` and ``torch.nn``-default initialisation ``_uniform``.
The networks are in :mod:`algorithms.engine.models` (MLR, MLP/DNN, CNN, BatchNormMLP) and
:mod:`algorithms.engine.models_resnet` (ResNet-18-GN)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]


def _uniform(shape, fan_in: int, gen: torch.Generator) -> torch.Tensor:
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * bound


def _dense(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x[N, B, d_in] @ w[N, d_in, d_out] + b[N, d_out]``, computed as ``(wᵀxᵀ + b)ᵀ``: with
    tiny per-client matrices this layout is ~2× faster on CPU than ``baddbmm(b, x, w)``."""
    return torch.baddbmm(b.unsqueeze(2), w.transpose(1, 2), x.transpose(1, 2)).transpose(1, 2)


class Model:
    """Interface: ``init``, ``forward``, ``layers``; plus the shared loss helpers."""

    layers: list[list[str]]
    l2: float = 0.0

    def init_single(self, gen: torch.Generator) -> Params:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def init(self, num: int, *, seed: int = 0, device=None, dtype=torch.float32,
             same: bool = True) -> Params:
        """Parameters for ``num`` copies ``[num, ...]``; identical copies when ``same``
        (a global model broadcast), otherwise ``num`` independent draws."""
        gen = torch.Generator().manual_seed(seed)
        draws = [self.init_single(gen) for _ in range(1 if same else num)]
        return {k: torch.stack([d[k] for d in draws]).expand(num, *draws[0][k].shape)
                .to(device=device, dtype=dtype).clone() for k in draws[0]}

    def per_client_loss(self, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy per client ``[N]`` (+ the ℓ2 term when ``l2 > 0``)."""
        logits = self.forward(params, x)
        # class axis second ([N, C, B]): dense layers produce that layout already, and a
        # softmax over dim 1 vectorises over the batch (over a last axis of length C it
        # does not)
        loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)
        if self.l2 > 0:
            reg = sum((params[k] ** 2).flatten(1).sum(1) for k in params if k.endswith("weight"))
            loss = loss + 0.5 * self.l2 * reg
        return loss

    def grad(self, params: Params, x: torch.Tensor, y: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Per-client gradients of the per-client mean loss, and the losses ``[N]``
        (autograd; models may override with a hand-written batched gradient)."""
        return self.autograd_grad(params, x, y)

    def autograd_grad(self, params: Params, x: torch.Tensor, y: torch.Tensor
                      ) -> tuple[Params, torch.Tensor]:
        """Gradients by autograd.  Clients' parameters are independent, so the gradient of
        the *sum* of per-client losses is each client's own gradient — one backward pass
        for all clients."""
        with torch.enable_grad():
            leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
            loss = self.per_client_loss(leaves, x, y)
            grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
        return dict(zip(leaves.keys(), grads)), loss.detach()
