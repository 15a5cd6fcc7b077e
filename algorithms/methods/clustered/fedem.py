"""FedEM — O. Marfoq, G. Neglia, A. Bellet, L. Kameni, R. Vidal, *Federated Multi-Task
Learning under a Mixture of Distributions*, NeurIPS 2021 (arXiv 2108.10252), Algorithm 1.

Every client's distribution is a mixture of M shared components: the server holds M
component models Θ_m, client i its mixture weights π_i ∈ Δ^M (initially uniform).  Round
``t`` (``S`` clients sampled):

* E-step (eq. 5), on every local training sample s of client i:
  ``q_s(m) ∝ π_im · exp(−ℓ(h_{Θ_m}(x_s), y_s))`` (with Θ^{t−1}, π^{t−1});
* M-step for the weights (eq. 6): ``π_im = (1/n_i) Σ_s q_s(m)``;
* M-step for the components (eq. 7), by the local solver: for each m, ``R`` SGD steps from
  Θ_m on the q-weighted loss ``(1/|D|) Σ_{s∈D} q_s(m) ℓ(h_θ(x_s), y_s)`` of a mini-batch D
  (the weights of the batch's samples are those of the E-step); uploads the M models;
* server: ``Θ_m = Σ_i n_i θ_{m,i} / Σ_i n_i``.

(Equation numbers 5–7 as we recall the arXiv version; no copy of the paper here to check
them against — the updates themselves are written out above.)

Client i predicts with its mixture ``p(y|x) = Σ_m π_im softmax(h_{Θ_m}(x))_y``
(:class:`Mixture`, evaluated as ``personalized``; its "logits" are the log-probabilities of
the mixture, so the reported loss is the mixture's cross-entropy).

With M = 1 every q is exactly 1 and FedEM is FedAvg (McMahan et al., AISTATS 2017) bit for
bit on a model trained by autograd (tested).  Departures: steps (one mini-batch each)
instead of local epochs; the q of a batch sample is recomputed from Θ^{t−1}, π^{t−1} on the
batch (the E-step's value; a client need not keep one weight per sample).  Paper default:
M = 3.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from algorithms.engine.steps import sgd_update
from algorithms.engine.base import (Params, State, batch_size_hp, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, register,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.models import Model
from pfl_theory.validation import positive_int

PREFIX = "component."


class Mixture(Model):
    """Client i's FedEM predictor over ``params = {"mixture": π [N, M], "component.<k>":
    Θ [N or 1, M, ...]}``: log Σ_m π_im softmax(h_{Θ_m}(x)) ``[N, B, C]``."""

    def __init__(self, model: Model):
        self.model, self.layers, self.l2 = model, model.layers, model.l2

    def forward(self, params, x):
        pi = params["mixture"]
        n, m = pi.shape
        comps = {k[len(PREFIX):]: v.expand(n, *v.shape[1:]).reshape(n * m, *v.shape[2:])
                 for k, v in params.items() if k.startswith(PREFIX)}
        logits = self.model.forward(comps, x.repeat_interleave(m, 0))
        logp = torch.log_softmax(logits, -1).view(n, m, *logits.shape[1:])
        return torch.logsumexp(logp + pi.log().view(n, m, 1, 1), 1)


def per_sample_loss(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor
                    ) -> torch.Tensor:
    """Cross-entropy per sample ``[N, B]`` (the form of :meth:`Model.per_client_loss`)."""
    return F.cross_entropy(model.forward(params, x).transpose(1, 2), y, reduction="none")


def responsibilities(model: Model, comps: Params, log_pi: torch.Tensor, x, y) -> torch.Tensor:
    """E-step (eq. 5) for rows ``[P·M]`` (client-major) on ``x[P·M, B, ...]``: ``q [P·M, B]``,
    ``q_s(m) = softmax_m(log π_m − ℓ_m(s))``; ``log_pi [P, M]``."""
    p, m = log_pi.shape
    with torch.no_grad():
        loss = per_sample_loss(model, comps, x, y).view(p, m, -1)
    return torch.softmax(log_pi.unsqueeze(2) - loss, 1).view(p * m, -1)


def weighted_grad(model: Model, params: Params, q: torch.Tensor, x, y) -> Params:
    """Gradient of ``mean_s q_s ℓ(θ; s)`` (+ the model's ℓ2 term) per row, by autograd."""
    with torch.enable_grad():
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        loss = (q * per_sample_loss(model, leaves, x, y)).mean(1)
        if model.l2 > 0:
            reg = sum((leaves[k] ** 2).flatten(1).sum(1) for k in leaves if k.endswith("weight"))
            loss = loss + 0.5 * model.l2 * reg
        grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
    return dict(zip(leaves, grads))


@register("fedem")
@dataclass(frozen=True)
class FedEM(Algorithm):
    """FedEM (Marfoq, Neglia, Bellet, Kameni, Vidal, NeurIPS 2021), Algorithm 1.  Symbols:
    M = ``num_components``, η = ``lr``, R = ``local_rounds`` (local SGD steps per
    component), |D| = ``batch_size``, S = ``clients_per_round``."""

    client_tensors = ("mixture",)
    needs_train = True      # the E-step's π update reads every local sample

    num_components: int = hp(3, "number M of mixture components", check=positive_int,
                             symbol="M")
    lr: float = local_lr_hp()
    local_rounds: int = hp(20, "local SGD steps R per round and component (one mini-batch each)",
                           check=positive_int, symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        m = self.num_components
        comps = model.init(m, seed=seed, device=fed.device, dtype=fed.dtype, same=False)
        pi = torch.full((fed.num_clients, m), 1.0 / m, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"components": comps}, {"mixture": pi})

    def evaluation_model(self, model: Model) -> Model:
        return Mixture(model)

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """E-step and π update on the client's training data; R q-weighted SGD steps per
        component; keeps π_i, uploads the M local components ``[P, M, ...]``."""
        comps, log_pi = view.server["components"], view.tensors["mixture"].log()
        p, m = log_pi.shape
        pi = self.mixture_update(model, comps, log_pi, view.train)
        start = {k: v.unsqueeze(0).expand(p, *v.shape).reshape(p * m, *v.shape[1:])
                 for k, v in comps.items()}
        x, y = view.batches["sgd"]
        theta = start
        for r in range(x.shape[0]):
            xr, yr = x[r].repeat_interleave(m, 0), y[r].repeat_interleave(m, 0)
            q = responsibilities(model, start, log_pi, xr, yr)
            g = weighted_grad(model, theta, q, xr, yr)
            theta = sgd_update(theta, g, self.lr, in_place=r > 0)   # ``start`` kept
        upload = {k: v.view(p, m, *v.shape[1:]) for k, v in theta.items()}
        return {"mixture": pi}, {"components": upload}

    @staticmethod
    def mixture_update(model, comps: Params, log_pi: torch.Tensor, split) -> torch.Tensor:
        """eq. 5–6 on every sample of ``split`` (the participants' train data): ``π [P, M]``."""
        p, m = log_pi.shape
        owner = torch.repeat_interleave(torch.arange(p, device=split.y.device), split.counts)
        with torch.no_grad():
            x = split.x.unsqueeze(0).expand(m, *split.x.shape)
            loss = per_sample_loss(model, comps, x, split.y.unsqueeze(0).expand(m, -1))
        q = torch.softmax(log_pi[owner].T - loss, 0)                   # [M, n]
        total = torch.zeros(p, m, dtype=q.dtype, device=q.device).index_add_(0, owner, q.T)
        return total / split.counts.to(q.dtype).unsqueeze(1)

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``Θ_m = Σ_i n_i θ_{m,i} / Σ_i n_i``."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        mean = weighted_mean(uploads["components"], counts)
        return with_server(state, {"components": {k: v[0] for k, v in mean.items()}}), None

    def evaluated(self, state: State) -> dict:
        comps = {PREFIX + k: v.unsqueeze(0) for k, v in state.models["components"].items()}
        return {"personalized": {"mixture": state.tensors["mixture"], **comps}}
