"""Server optimisers: FedAvgM, FedAdagrad, FedYogi, FedAdam.

FedAdagrad, FedYogi, FedAdam — S. J. Reddi, Z. Charles, M. Zaheer, Z. Garrett, K. Rush,
J. Konečný, S. Kumar, H. B. McMahan, *Adaptive Federated Optimization*, ICLR 2021
(arXiv 2003.00295), Algorithm 2.  FedAvgM — T.-M. H. Hsu, H. Qi, M. Brown, *Measuring the
Effects of Non-Identical Data Distribution for Federated Visual Classification*, arXiv
1909.06335 (2019), §3 (server momentum).

Round ``t``: the ``S`` sampled clients run FedAvg's ``R`` local SGD steps from ``x_t``
(:func:`algorithms.engine.steps.local_sgd`); the server forms the pseudo-gradient

    Δ_t = mean_{i∈S} (x_i − x_t)                       (Algorithm 2, line 9)

and applies an optimiser to it, per coordinate:

* FedAvgM:    u_t = β u_{t−1} + Δ_t,   x_{t+1} = x_t + η u_t       (u_{−1} = 0)
* FedAdagrad: v_t = v_{t−1} + Δ_t²
* FedYogi:    v_t = v_{t−1} − (1 − β₂) Δ_t² sign(v_{t−1} − Δ_t²)
* FedAdam:    v_t = β₂ v_{t−1} + (1 − β₂) Δ_t²
  with m_t = β₁ m_{t−1} + (1 − β₁) Δ_t and x_{t+1} = x_t + η m_t / (√v_t + τ)
  (lines 10–14; m_{−1} = 0, v_{−1} = τ² — the paper asks v_{−1} ≥ τ²).

Readings: ``aggregation`` — the paper's mean is uniform over the sampled clients
(``"uniform"``, default), ``"weighted"`` uses the sample counts (FedAvg's mean, and Flower's
``FedOpt`` strategies).  ``reading = "flower"`` follows Flower 1.x's strategies instead of the
paper: v_{−1} = 0 and, for FedAdam only, the bias-corrected rate
η √(1 − β₂^{r+1}) / (1 − β₁^{r+1}) with ``r`` Flower's 1-based server round (tested against
Flower's own ``FedAdam``/``FedYogi``/``FedAdagrad``/``FedAvgM`` arithmetic).  With η = 1 and
β = 0, FedAvgM is FedAvg's round (to rounding: ``x + (x̄ − x)``).
Defaults: β₁ = 0.9, β₂ = 0.99, τ = 10⁻³ (the paper's experiments, §5 and App. D; η is tuned
there on a grid — the toolkit's default η is a starting value, not the paper's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, local_rounds_hp, one_of,
                             register, validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.steps import local_sgd
from pfl_theory.validation import in_range, positive

REDDI = "Reddi et al., ICLR 2021"


def _beta(name, value):
    # β ∈ [0, 1): β = 1 would never forget (and makes Adam's bias correction divide by 0)
    value = in_range(name, value, 0.0, 1.0)
    if value >= 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return value


def pseudo_gradient(mean_model: Params, x: Params) -> Params:
    """``Δ_t = x̄ − x_t`` (Algorithm 2, line 9, with the mean taken first)."""
    return {k: mean_model[k] - x[k] for k in x}


def second_moment(rule: str, v: Params, delta: Params, beta2: float) -> Params:
    """``v_t`` of Algorithm 2 (lines 11–13) for ``rule`` in adagrad / yogi / adam."""
    if rule == "adagrad":
        return {k: v[k] + delta[k] * delta[k] for k in v}
    if rule == "yogi":
        return {k: v[k] - (1 - beta2) * delta[k] * delta[k] * torch.sign(v[k] - delta[k] * delta[k])
                for k in v}
    return {k: beta2 * v[k] + (1 - beta2) * delta[k] * delta[k] for k in v}


@dataclass(frozen=True)
class _ServerOptimizer(Algorithm):
    """FedAvg's clients; a server optimiser on the pseudo-gradient (module docstring)."""

    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    aggregation: str = hp("uniform", "mean of the client models: 'uniform' (paper) or "
                          "'weighted' by sample counts (FedAvg's, Flower's)",
                          check=one_of("uniform", "weighted"), symbol="—")

    #: the server models kept beside ``global`` (never sent to the clients)
    buffers = ()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        x = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"global": x, **{b: self.initial_buffer(b, x) for b in self.buffers}})

    def initial_buffer(self, name: str, x: Params) -> Params:
        return {k: torch.zeros_like(v) for k, v in x.items()}

    def first_phase(self, state: State, fed, model) -> Phase:
        phase = train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)
        return dataclasses.replace(phase, send=("global",))

    def client_update(self, phase, model, view):
        """R SGD steps from the broadcast ``x_t``; uploads the local model."""
        x, y = view.batches["sgd"]
        return {}, {"global": local_sgd(model, broadcast(view.server["global"], x.shape[1]),
                                        x, y, self.lr, owned=True)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``Δ_t`` from the uploads, then the optimiser's step (:meth:`step`)."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        weights = counts if self.aggregation == "weighted" else torch.ones_like(counts)
        x = state.models["global"]
        delta = pseudo_gradient(weighted_mean(uploads["global"], weights), x)
        return with_server(state, self.step(state, x, delta)), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}


@register("fedavgm")
@dataclass(frozen=True)
class FedAvgM(_ServerOptimizer):
    """FedAvgM (Hsu, Qi, Brown, arXiv 1909.06335): server momentum on the pseudo-gradient.
    Symbols: η = ``server_lr``, β = ``momentum``; client side as FedAvg (η_l = ``lr``)."""

    server_lr: float = hp(1.0, "server step size η (x ← x + η u)", check=positive, symbol="η")
    momentum: float = hp(0.9, "server momentum β (u ← β u + Δ)", check=_beta, symbol="β")
    buffers = ("momentum_buffer",)

    def step(self, state, x, delta):
        u = {k: self.momentum * state.models["momentum_buffer"][k] + delta[k] for k in x}
        return {"global": {k: x[k] + self.server_lr * u[k] for k in x}, "momentum_buffer": u}


@dataclass(frozen=True)
class _Adaptive(_ServerOptimizer):
    """Algorithm 2 of Reddi et al. (ICLR 2021): η = ``server_lr``, η_l = ``lr``, β₁, β₂, τ."""

    server_lr: float = hp(0.1, "server step size η (x ← x + η m/(√v + τ))", check=positive,
                          symbol="η")
    beta1: float = hp(0.9, "first-moment decay β₁", check=_beta, symbol="β₁")
    beta2: float = hp(0.99, "second-moment decay β₂ (FedYogi, FedAdam)", check=_beta, symbol="β₂")
    tau: float = hp(1e-3, "adaptivity τ (v_{−1} = τ² in the paper's reading)", check=positive,
                    symbol="τ")
    reading: str = hp("paper", "'paper' (v_{-1} = τ²) or 'flower' (v_{-1} = 0; FedAdam's "
                      "bias-corrected rate, as Flower's strategies)",
                      check=one_of("paper", "flower"), symbol="—")
    buffers = ("first_moment", "second_moment")
    rule = "adam"

    def initial_buffer(self, name, x):
        fill = self.tau ** 2 if name == "second_moment" and self.reading == "paper" else 0.0
        return {k: torch.full_like(v, fill) for k, v in x.items()}

    def rate(self, state) -> float:
        """η, or Flower's bias-corrected η for FedAdam (server round r = state.round + 1)."""
        if self.rule != "adam" or self.reading != "flower":
            return self.server_lr
        r = state.round + 1
        return self.server_lr * (1 - self.beta2 ** (r + 1.0)) ** 0.5 / (1 - self.beta1 ** (r + 1.0))

    def step(self, state, x, delta):
        m0, v0 = state.models["first_moment"], state.models["second_moment"]
        m = {k: self.beta1 * m0[k] + (1 - self.beta1) * delta[k] for k in x}
        v = second_moment(self.rule, v0, delta, self.beta2)
        eta = self.rate(state)
        new_x = {k: x[k] + eta * m[k] / (torch.sqrt(v[k]) + self.tau) for k in x}
        return {"global": new_x, "first_moment": m, "second_moment": v}


@register("fedadagrad")
@dataclass(frozen=True)
class FedAdagrad(_Adaptive):
    """FedAdagrad (Reddi et al., ICLR 2021, Algorithm 2): v_t = v_{t−1} + Δ_t² (β₂ unused)."""

    rule = "adagrad"


@register("fedyogi")
@dataclass(frozen=True)
class FedYogi(_Adaptive):
    """FedYogi (Reddi et al., ICLR 2021, Algorithm 2): v_t = v_{t−1} − (1−β₂)Δ_t² sign(v_{t−1} − Δ_t²)."""

    rule = "yogi"


@register("fedadam")
@dataclass(frozen=True)
class FedAdam(_Adaptive):
    """FedAdam (Reddi et al., ICLR 2021, Algorithm 2): v_t = β₂ v_{t−1} + (1−β₂)Δ_t²."""

    rule = "adam"
