"""FedRoD — H.-Y. Chen, W.-L. Chao, *On Bridging Generic and Personalized Federated Learning
for Image Classification*, ICLR 2022 (arXiv 2107.00778), Algorithm 1, the linear
personalized head ("FedRoD (linear)").

The network is a body φ (feature extractor: every layer but the last) and two heads on its
features ``h = φ(x)``: the generic head ψ_G (shared) and client i's personalized head
ψ_P,i.  The generic model (φ, ψ_G) minimises the *balanced risk* with the Balanced Softmax
loss (eq. 6 with Ren et al., NeurIPS 2020)

    ℓ_BSM(x, y) = − log softmax(z_G + log π_i)_y,     z_G = ψ_G(φ(x)),

π_i client i's training class distribution, while the personalized prediction is
``z_G + z_P``, ``z_P = ψ_P,i(φ(x))``, trained by the empirical risk ``CE(z_G + z_P, y)``
with φ and ψ_G fixed (eq. 7).  Per mini-batch (both losses at the same (φ, ψ_G, ψ_P,i),
as the paper and the authors' code):

    (φ, ψ_G) ← (φ, ψ_G) − η ∇ ℓ_BSM,        ψ_P,i ← ψ_P,i − η_P ∇_{ψ_P} CE(z_G + z_P, y);

the server averages (φ, ψ_G) over the sampled clients by sample counts (FedAvg).  With
linear heads ``z_G + z_P`` is the network with head ``ψ_G + ψ_P,i``, which is how the
personalized model is evaluated and how ∇_{ψ_P} is computed (chain rule: the head gradient
of that network).

(Equation numbers 6–7 as we recall the arXiv version; no copy of the paper here to check
them against — the two losses are written out above.)

Implementation: ``log π_i`` enters as ``log n_{i,c} − max_c log n_{i,c}`` (a per-client
constant shift, which softmax ignores) so that a client with balanced labels adds an exact
zero: then the generic model's steps are FedAvg's with cross-entropy bit for bit (tested;
this is the reduction "FedRoD's generic model = FedAvg with its loss": BSM = CE under a
uniform prior).  A class a client does not hold gets ``log 0 = −∞`` (probability 0 in its
BSM, as in the authors' code).  The class counts are computed once by the clients (an
initial phase) and stay on them.

Departures: the personalized head starts at zero (the personalized model starts as the
generic one; PFLlib copies the generic head); the hypernetwork variant is not implemented;
steps, not epochs.  Evaluated: ``personalized`` (φ, ψ_G + ψ_P,i) and ``global`` (φ, ψ_G),
the generic model that FedRoD reports for generic FL.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.steps import sgd_update
from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, everyone, initial_state, train_phase, with_server
from algorithms.engine.heads import merge, split_keys, subset
from algorithms.engine.models import Model
from pfl_theory.validation import positive, positive_int


class PriorShifted(Model):
    """``model`` with ``shift[N, C]`` added to its logits (the Balanced Softmax loss when
    ``shift = log π``); gradients by autograd through ``model.forward``."""

    def __init__(self, model: Model, shift: torch.Tensor):
        self.model, self.shift, self.layers, self.l2 = model, shift, model.layers, model.l2

    def forward(self, params, x):
        return self.model.forward(params, x) + self.shift.unsqueeze(1)


def class_counts(split, num_classes: int, dtype) -> torch.Tensor:
    """Per-client label counts ``[N, C]`` of ``split``."""
    owner = torch.repeat_interleave(torch.arange(split.num_clients, device=split.y.device),
                                    split.counts)
    flat = torch.bincount(owner * num_classes + split.y, minlength=split.num_clients * num_classes)
    return flat.view(split.num_clients, num_classes).to(dtype)


def log_prior_shift(counts: torch.Tensor) -> torch.Tensor:
    """``log n_c − max_c log n_c`` per row: log π up to a per-row constant; exactly 0 for a
    row of equal counts, −∞ for a class with no sample."""
    logs = counts.log()
    return logs - logs.max(1, keepdim=True).values


@register("fedrod")
@dataclass(frozen=True)
class FedRoD(Algorithm):
    """FedRoD (Chen, Chao, ICLR 2022), Algorithm 1 with linear heads.  Symbols: η = ``lr``
    (generic model), η_P = ``personal_lr`` (personalized head), E ↔ R = ``local_rounds``
    (steps), |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("personal_head",)
    client_tensors = ("class_counts",)

    lr: float = hp(0.02, "learning rate η of the generic model (Balanced Softmax loss)",
                   check=positive, symbol="η")
    personal_lr: float = hp(0.02, "learning rate η_P of the personalized head", check=positive,
                            symbol="η_P")
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="E")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def server_init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        body, head = split_keys(model, 1)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        zero_head = {k: torch.zeros_like(w[k]) for k in head}
        counts = torch.zeros(fed.num_clients, fed.num_classes, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"body": subset(w, body), "generic_head": subset(w, head),
                               "personal_head": broadcast(zero_head, fed.num_clients)},
                     {"class_counts": counts})

    def init_phase(self, state: State, fed, model) -> Phase:
        return Phase("count", everyone(fed))

    def init(self, fed, model, seed: int) -> State:
        return initial_state(self, fed, model, seed)

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """``count``: the client's label counts (kept).  ``train``: R steps of the generic
        model on ℓ_BSM and of the personalized head on CE(z_G + z_P); uploads (φ, ψ_G)."""
        if phase.name == "count":
            return {"class_counts": class_counts(view.train, view.num_classes,
                                                 view.tensors["class_counts"].dtype)}, {}
        x, y = view.batches["sgd"]
        n = x.shape[1]
        generic = merge(broadcast(view.server["body"], n),
                        broadcast(view.server["generic_head"], n))
        personal = view.models["personal_head"]
        balanced = PriorShifted(model, log_prior_shift(view.tensors["class_counts"]))
        for r in range(x.shape[0]):
            g, _ = balanced.grad(generic, x[r], y[r])
            joint = {**generic, **{k: generic[k] + personal[k] for k in personal}}
            gp, _ = model.grad(joint, x[r], y[r])
            generic = sgd_update(generic, g, self.lr, in_place=True)    # own (broadcast)
            personal = sgd_update(personal, gp, self.personal_lr, in_place=r > 0)
        body = [k for k in generic if k not in personal]
        return {"personal_head": personal}, {"body": subset(generic, body),
                                             "generic_head": subset(generic, list(personal))}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "count":
            return state, None
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        new = {k: weighted_mean(uploads[k], counts) if uploads[k] else {}
               for k in ("body", "generic_head")}
        return with_server(state, new), None

    def evaluated(self, state: State) -> dict:
        body, head = state.models["body"], state.models["generic_head"]
        personal = state.models["personal_head"]
        n = next(iter(personal.values())).shape[0]
        mixed = {k: head[k] + personal[k] for k in head}
        return {"personalized": {k: v.contiguous() for k, v in merge(body, mixed, n=n).items()},
                "global": {**body, **head}}
