"""Bring your own model: any single-client ``torch.nn.Module``, batched over clients.

:class:`FunctionalModel` wraps a module that maps one client's batch ``x[B, ...]`` to logits
``[B, C]`` and implements the batched :class:`~algorithms.engine.models.Model` interface of the
engine (``init``, ``forward``, ``grad``, ``layers``) with ``torch.func``: the module's
parameters become a dict ``{name: Tensor[N, ...]}`` (one slice per client),
``forward`` is ``vmap(functional_call(module, ...))`` over clients and ``grad`` is
``vmap(grad_and_value(loss))`` — every client's gradient in one call, no Python loop.
The hand-written fast paths of :mod:`algorithms.engine.models` (MLR, MLP, CNN) stay the default for
the built-in models; this is the general path.

Example::

    import torch.nn as nn
    from algorithms.engine.base import get_algorithm
    from algorithms.engine.functional import FunctionalModel
    from algorithms.engine.runner import run
    from synthetic.sources import DataSpec, build_federation

    fed = build_federation(DataSpec(data="synthetic", num_clients=20))
    net = nn.Sequential(nn.Linear(60, 32), nn.Tanh(), nn.Linear(32, 10))
    model = FunctionalModel(net)
    result = run(get_algorithm("pfedme")(), fed, model, rounds=20)

Requirements on the module: it is stateless in the forward pass (no BatchNorm running
statistics updated in training mode — use ``GroupNorm``/``LayerNorm``; buffers are read,
never written), deterministic (no dropout), and its parameters are initialised by
``reset_parameters`` where it has one (the seed of :meth:`Model.init` is honoured by
re-running ``reset_parameters`` under a forked RNG).  ``layers`` groups parameters by
their owning sub-module, in registration order (``"0.weight", "0.bias"`` → one layer), so
layer-wise algorithms (FedRep, PPFE, PLGU) see one group per ``Linear``/``Conv`` layer;
pass ``layers=`` to choose otherwise.  Works with every registered algorithm that needs
only these methods.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap

from algorithms.engine.models import Model
from pfl_theory.validation import nonnegative

Params = dict[str, torch.Tensor]


def _layers_of(module: torch.nn.Module) -> list[list[str]]:
    """Parameter names grouped by owning sub-module, in registration order."""
    groups: dict[str, list[str]] = {}
    for name, _ in module.named_parameters():
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        groups.setdefault(owner, []).append(name)
    return list(groups.values())


class FunctionalModel(Model):
    """A single-client ``nn.Module`` as a batched engine model (see the module docstring).

    ``module(x[B, ...]) -> logits[B, C]``; ``l2`` adds ``l2/2 ‖W‖²`` over parameters whose
    name ends in ``weight`` (as the built-in models); ``layers`` overrides the grouping of
    parameters into layers."""

    def __init__(self, module: torch.nn.Module, *, l2: float = 0.0,
                 layers: list[list[str]] | None = None) -> None:
        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        names = [n for n, _ in module.named_parameters()]
        if not names:
            raise ValueError("module has no parameters to train")
        self.module = module
        self.l2 = nonnegative("l2", l2)
        self.layers = [list(g) for g in (layers if layers is not None else _layers_of(module))]
        flat = [n for g in self.layers for n in g]
        if sorted(flat) != sorted(names):
            raise ValueError(f"layers must partition the module's parameters {names}, "
                             f"got {self.layers}")
        self._buffers = {k: v.detach() for k, v in module.named_buffers()}

    def init_single(self, gen: torch.Generator) -> Params:
        """One client's parameters (float64): the module re-initialised by its
        ``reset_parameters`` under a seed drawn from ``gen`` (deterministic per seed)."""
        seed = int(torch.randint(0, 2 ** 62, (1,), generator=gen))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = copy.deepcopy(self.module).to("cpu")
            for sub in fresh.modules():
                reset = getattr(sub, "reset_parameters", None)
                if callable(reset):
                    reset()
        return {k: v.detach().to(torch.float64).clone() for k, v in fresh.named_parameters()}

    def _buffers_like(self, like: torch.Tensor) -> dict[str, torch.Tensor]:
        return {k: (v.to(like.device, like.dtype) if v.is_floating_point() else v.to(like.device))
                for k, v in self._buffers.items()}

    def _single_logits(self, params: Params, buffers: dict[str, torch.Tensor],
                       x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, {**params, **buffers}, (x,))

    def forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, B, C]`` for inputs ``x[N, B, ...]`` (client ``i`` uses ``params[·][i]``)."""
        buffers = self._buffers_like(next(iter(params.values())))
        return vmap(self._single_logits, in_dims=(0, None, 0))(params, buffers, x)

    def _single_loss(self, params: Params, buffers: dict[str, torch.Tensor], x: torch.Tensor,
                     y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(self._single_logits(params, buffers, x), y)
        if self.l2 > 0:
            loss = loss + 0.5 * self.l2 * sum((v ** 2).sum() for k, v in params.items()
                                              if k.endswith("weight"))
        return loss

    def grad(self, params: Params, x: torch.Tensor, y: torch.Tensor
             ) -> tuple[Params, torch.Tensor]:
        """Per-client gradients of the per-client mean cross-entropy (+ ℓ2) and the losses
        ``[N]``: ``vmap(grad_and_value(loss))`` over clients."""
        buffers = self._buffers_like(next(iter(params.values())))
        params = {k: v.detach() for k, v in params.items()}
        with torch.enable_grad():
            grads, loss = vmap(grad_and_value(self._single_loss), in_dims=(0, None, 0, 0))(
                params, buffers, x, y)
        return grads, loss.detach()

    def __repr__(self) -> str:
        return f"FunctionalModel({self.module.__class__.__name__}, layers={len(self.layers)})"


def as_model(model: Any) -> Model:
    """``model`` itself if it already is an engine :class:`Model`, else a
    :class:`FunctionalModel` around the ``nn.Module``."""
    return model if isinstance(model, Model) else FunctionalModel(model)
