"""A batched network with batch normalisation: every client its own BatchNorm statistics.

:class:`BatchNormMLP` is :class:`~algorithms.models.MLP` with a BatchNorm layer (S. Ioffe,
C. Szegedy, *Batch Normalization*, ICML 2015, Algorithm 1) after every hidden dense layer,
``x → relu(BN(x W1 + b1)) → … → h W_L + b_L`` — the layout of FedBN's experiments (X. Li,
M. Jiang, X. Zhang, M. Kamp, Q. Dou, *FedBN*, ICLR 2021: a BN layer after every hidden
layer).  The client is the leading dimension of every parameter, so the batch statistics of
a training step are each client's own (mean and variance over its mini-batch, dim 1).

Parameters per BN layer ``l``: the affine ``bn{l}.weight`` (γ, init 1), ``bn{l}.bias`` (β,
init 0) and the *buffers* ``bn{l}.running_mean`` (init 0), ``bn{l}.running_var`` (init 1),
which are not trained: :meth:`BatchNormMLP.grad` returns zeros for them.  A training step
(:func:`algorithms.steps.local_sgd` on a model with ``buffers``) uses the batch statistics
and moves the buffers as ``torch.nn.BatchNorm1d`` does (momentum m = 0.1):
``running ← (1 − m) running + m · batch``, with the unbiased batch variance
(``B/(B − 1)``); :meth:`forward` (evaluation) normalises with the buffers.  A layer group of
:attr:`layers` is the dense layer together with the BN layer after it, so ``head_layers``
counts dense layers as for :class:`~algorithms.models.MLP`.

:attr:`norm_keys` names every BN entry (affine and buffers): what FedBN keeps local.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from algorithms.models import Model, Params, _dense, _uniform
from pfl_theory.validation import positive_int

BUFFER_SUFFIXES = (".running_mean", ".running_var")


@dataclass
class BatchNormMLP(Model):
    """MLP with BatchNorm after every hidden dense layer (FedBN's layout), batched."""

    dim: int
    num_classes: int
    hidden: tuple[int, ...] = (32,)
    momentum: float = 0.1
    eps: float = 1e-5

    def __post_init__(self):
        positive_int("dim", self.dim)
        positive_int("num_classes", self.num_classes, minimum=2)
        self.hidden = tuple(positive_int("hidden width", h) for h in self.hidden)
        if not 0 < self.momentum <= 1:
            raise ValueError(f"momentum must be in (0, 1], got {self.momentum}")
        self.widths = (self.dim, *self.hidden, self.num_classes)
        last = len(self.widths) - 1
        self.layers = [[f"fc{l}.weight", f"fc{l}.bias"]
                       + ([f"bn{l}.weight", f"bn{l}.bias", f"bn{l}.running_mean",
                           f"bn{l}.running_var"] if l < last else [])
                       for l in range(1, last + 1)]
        self.norm_keys = tuple(k for layer in self.layers for k in layer if k.startswith("bn"))
        self.buffers = tuple(k for k in self.norm_keys if k.endswith(BUFFER_SUFFIXES))

    def init_single(self, gen):
        out = {}
        for l in range(1, len(self.widths)):
            d_in, d_out = self.widths[l - 1], self.widths[l]
            out[f"fc{l}.weight"] = _uniform((d_in, d_out), d_in, gen)
            out[f"fc{l}.bias"] = _uniform((d_out,), d_in, gen)
            if l < len(self.widths) - 1:
                out[f"bn{l}.weight"] = torch.ones(d_out, dtype=torch.float64)
                out[f"bn{l}.bias"] = torch.zeros(d_out, dtype=torch.float64)
                out[f"bn{l}.running_mean"] = torch.zeros(d_out, dtype=torch.float64)
                out[f"bn{l}.running_var"] = torch.ones(d_out, dtype=torch.float64)
        return out

    def _run(self, params: Params, x: torch.Tensor, train: bool):
        """Logits ``[N, B, C]`` and, in training mode, the moved buffers."""
        h = x.flatten(2)
        last = len(self.widths) - 1
        moved: Params = {}
        for l in range(1, last + 1):
            h = _dense(h, params[f"fc{l}.weight"], params[f"fc{l}.bias"])
            if l == last:
                break
            mean_key, var_key = f"bn{l}.running_mean", f"bn{l}.running_var"
            if train:
                batch = h.shape[1]
                if batch < 2:
                    raise ValueError("batch normalisation needs mini-batches of at least 2 "
                                     f"samples, got {batch}")
                mean = h.mean(1)                                    # [N, width]
                var = h.var(1, unbiased=False)
                m = self.momentum
                with torch.no_grad():
                    moved[mean_key] = (1 - m) * params[mean_key] + m * mean.detach()
                    moved[var_key] = ((1 - m) * params[var_key]
                                      + m * var.detach() * (batch / (batch - 1)))
            else:
                mean, var = params[mean_key], params[var_key]
            h = (h - mean.unsqueeze(1)) / torch.sqrt(var.unsqueeze(1) + self.eps)
            h = torch.relu(h * params[f"bn{l}.weight"].unsqueeze(1)
                           + params[f"bn{l}.bias"].unsqueeze(1))
        return h, moved

    def forward(self, params, x):
        """Evaluation mode: every BN layer normalises with the client's running statistics."""
        return self._run(params, x, train=False)[0]

    def train_grad(self, params: Params, x: torch.Tensor, y: torch.Tensor
                   ) -> tuple[Params, torch.Tensor, Params]:
        """Training mode (batch statistics): per-client gradients of the mean cross-entropy
        (zeros for the buffers), the losses ``[N]``, and the buffers moved by this batch."""
        with torch.enable_grad():
            leaves = {k: v if k in self.buffers else v.detach().requires_grad_(True)
                      for k, v in params.items()}
            logits, moved = self._run(leaves, x, train=True)
            loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)
            trained = [k for k in leaves if k not in self.buffers]
            grads = dict(zip(trained, torch.autograd.grad(loss.sum(),
                                                          [leaves[k] for k in trained])))
        grads.update({k: torch.zeros_like(params[k]) for k in self.buffers})
        return {k: grads[k] for k in params}, loss.detach(), moved

    def grad(self, params, x, y):
        g, loss, _ = self.train_grad(params, x, y)
        return g, loss


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
