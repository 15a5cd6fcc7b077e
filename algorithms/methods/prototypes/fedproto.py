"""FedProto — Y. Tan, G. Long, L. Liu, T. Zhou, Q. Lu, J. Jiang, C. Zhang, *FedProto:
Federated Prototype Learning across Heterogeneous Clients*, AAAI 2022 (arXiv 2105.00243).

Clients keep their whole models; only class *prototypes* (mean features) travel.  With
``z = φ_i(x)`` the input of client i's last layer (:mod:`algorithms.engine.features`):

* local prototypes (eq. 5): ``C_i^{(j)} = (1/|D_{i,j}|) Σ_{(x,y)∈D_{i,j}} φ_i(x)``;
* global prototypes (eq. 6): ``C̄^{(j)} = Σ_{i∈N_j} |D_{i,j}| C_i^{(j)} / Σ_{i∈N_j}
  |D_{i,j}|`` over the participants ``N_j`` holding class j;
* local objective (eq. 7–8): ``L_S(F_i(x), y) + λ · R(φ_i(x), C̄^{(y)})`` with ``R`` the
  squared distance averaged over the batch and the ``D`` feature coordinates (the authors'
  code: ``nn.MSELoss`` between the features and their class's global prototype).

Round ``t`` (``S`` clients sampled uniformly, all batched): each participant runs ``R``
SGD steps (lr η) on its model under that objective, then computes its prototypes over all
its training rows with the new model and uploads them with its class counts; the server
forms ``C̄``.  A class no participant held keeps its prototype; before a class has one its
samples carry no regulariser (the authors' code skips the term in the first round).
Evaluated: ``personalized`` = each client's own model (a client never sampled keeps its
initialisation, as in the paper).

Readings: eq. 6 as printed, ``(1/|N_j|) Σ_i (|D_{i,j}|/N_j) C_i^{(j)}``, normalises twice;
read with ``N_j = Σ_i |D_{i,j}|`` and the ``1/|N_j|`` dropped, it is the sample-weighted
mean above (the pooled class mean of the participants' features); the authors' code takes
the unweighted mean over clients.  Local steps are one mini-batch each (the paper: epochs).
The paper's heterogeneous architectures are one model here.  Reductions (tested):
``λ = 0`` (or an :class:`~algorithms.engine.models.MLR`, whose features ``z = x`` carry no
parameters) is local training of the participants, bit for bit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, local_rounds_hp, register,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.features import (all_rows_phase_parts, body_keys, class_sums, client_rows,
                                 feature_dim, features, head_keys, loss_grad,
                                 inert_without_body)
from pfl_theory.validation import nonnegative


def prototype_penalty(protos: torch.Tensor, known: torch.Tensor, lam: float):
    """``λ (1/(B·D)) Σ_b known_{y_b} ‖z_b − C̄^{(y_b)}‖²`` per client (``protos [1 or N, C,
    D]``, ``known [1 or N, C]``): the authors' ``MSELoss`` on the classes with a prototype."""
    def penalty(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = protos.expand(z.shape[0], *protos.shape[1:])
        target = torch.gather(p, 1, y.unsqueeze(-1).expand(*y.shape, z.shape[-1]))
        on = torch.gather(known.expand(z.shape[0], -1), 1, y).to(z.dtype)
        return lam * (((z - target) ** 2).sum(-1) * on).sum(1) / (z.shape[1] * z.shape[2])
    return penalty


def regularised_sgd(model, params, keys, x, y, lr: float, penalty=None):
    """One SGD step per mini-batch of ``x[R, N, B, ...]`` on the keys ``keys`` under
    cross-entropy (+ ``penalty(z, y)``); without a penalty (or with no body parameters,
    where it is constant) the model's own gradient — exactly :func:`local_sgd`."""
    plain = penalty is None or not body_keys(model)
    for r in range(x.shape[0]):
        if plain:
            g, _ = model.grad(params, x[r], y[r])
        else:
            g, _ = loss_grad(model, params, keys, x[r], y[r], penalty=penalty)
        params = {k: params[k] - lr * g[k] if k in g and k in keys else params[k]
                  for k in params}
    return params


def pooled_prototypes(counts: torch.Tensor, sums: torch.Tensor, old: torch.Tensor,
                      old_known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 6 (read as the sample-weighted mean): ``Σ_i sums_i / Σ_i counts_i`` per class over
    the uploads ``counts [P, C]``, ``sums [P, C, D]``; a class without samples keeps ``old``."""
    total = counts.sum(0)
    new = sums.sum(0) / total.clamp(min=1).unsqueeze(-1)
    has = total > 0
    return torch.where(has.unsqueeze(-1), new, old), (has | old_known.bool()).to(old.dtype)


@register("fedproto")
@dataclass(frozen=True)
class FedProto(Algorithm):
    """FedProto (Tan et al., AAAI 2022, arXiv 2105.00243), Algorithm 1: λ = ``lam``
    (prototype regulariser), η = ``lr``, R = ``local_rounds``, |D| = ``batch_size``, S =
    ``clients_per_round``."""

    client_models = ("personalized",)

    lam: float = hp(1.0, "weight λ of the prototype regulariser (paper/code default 1)",
                    check=nonnegative, symbol="λ")
    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def inert_hyperparameters(self, model) -> dict[str, str]:
        """λ cannot change the result with an MLR: the prototype term λ‖z − c_y‖² has
        z = x (no body), which no parameter changes, so its gradient is zero."""
        return inert_without_body(model, {"lam": "with --model mlr the features are the "
                                          "inputs (no body), so the prototype term's "
                                          "gradient is zero"})

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        head_keys(model)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        z = dict(device=fed.device, dtype=fed.dtype)
        protos = {"protos": torch.zeros(1, fed.num_classes, feature_dim(model), **z),
                  "known": torch.zeros(1, fed.num_classes, **z)}
        return State(0, seed, {"personalized": broadcast(w, fed.num_clients), "protos": protos})

    def first_phase(self, state: State, fed, model) -> Phase:
        phase = train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)
        batches, payload = all_rows_phase_parts(fed, phase.clients)
        return dataclasses.replace(phase, batches={**phase.batches, **batches}, payload=payload)

    def client_update(self, phase, model, view):
        """R regularised SGD steps on the own model, then its prototypes (counts and sums
        over all its training rows) are uploaded."""
        x, y = view.batches["sgd"]
        protos = view.server["protos"]
        params = view.models["personalized"]
        penalty = None
        if self.lam > 0 and bool(protos["known"].any()):
            penalty = prototype_penalty(protos["protos"], protos["known"], self.lam)
        params = regularised_sgd(model, params, list(params), x, y, self.lr, penalty)
        xa, ya, mask = client_rows(view)
        counts, sums = class_sums(features(model, params, xa), ya, mask, view.num_classes)
        return {"personalized": params}, {"counts": counts, "sums": sums}

    def server_aggregate(self, phase, state, uploads, fed, model):
        old = state.models["protos"]
        protos, known = pooled_prototypes(uploads["counts"], uploads["sums"], old["protos"][0],
                                          old["known"][0])
        return with_server(state, {"protos": {"protos": protos[None], "known": known[None]}}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        """How many classes have a global prototype."""
        return {"classes_with_prototype": float(state.models["protos"]["known"].sum())}
