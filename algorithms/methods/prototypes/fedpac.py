"""FedPAC — J. Xu, X. Tong, S.-L. Huang, *Personalized Federated Learning with Feature
Alignment and Classifier Collaboration*, ICLR 2023 (arXiv 2306.11867), Algorithm 1.

The network is a shared body φ (feature extractor) and a personal linear head ψ_i (the last
layer; :mod:`algorithms.engine.features`).  Round ``t`` (``S`` clients sampled uniformly, batched):

1. *statistics* (§4.2, with the received body φ^t, over all of client i's rows):
   ``ĥ_i = [p_{i,c} μ_{i,c}]_c`` (prior-weighted class means, ``C × D``) and
   ``V_i = (1/n_i) Σ_c (p_{i,c} E[‖z‖² | c] − p_{i,c}² ‖μ_{i,c}‖²)``;
2. *classifier update*: ``τ`` SGD steps (lr η) on the head ψ_i, body fixed, cross-entropy;
3. *feature alignment* (eq. 7): ``R`` SGD steps on the body, head fixed, under
   ``CE + λ · (1/(B·D)) Σ_b ‖φ(x_b) − c_{y_b}‖²`` with the global prototypes ``c`` (the
   authors' ``MSELoss``; classes without a prototype carry no term, none in round 0);
4. the client's prototypes ``μ_{i,c}`` with its new body; uploads φ_i, ψ_i, the
   prototypes (as counts and sums) and ``(ĥ_i, V_i)``;
5. server: ``φ^{t+1} = Σ n_i φ_i / Σ n_i``; ``c_j = Σ_i n_{i,j} μ_{i,j} / Σ_i n_{i,j}``;
   *classifier collaboration* (eq. 9–10): for each participant i the weights
   ``α_i = argmin_{α ∈ Δ} αᵀ Q_i α`` with ``Q_i = diag(V) + G_i``, ``(G_i)_{jk} = Σ_c ⟨ĥ_{i,c}
   − ĥ_{j,c}, ĥ_{i,c} − ĥ_{k,c}⟩`` (j, k over the participants), and the new head
   ``ψ_i ← Σ_j α_{ij} ψ_j``, sent back in a second exchange (``combine``).

Evaluated: ``personalized`` = global body + own head (a client never sampled keeps its
initial head).

Departures: the quadratic programs (one per participant, all batched) are solved by
accelerated projected gradient on the simplex (FISTA, step ``1/(2λ_max(Q_i))``,
at most :data:`QP_STEPS` iterations, stopping once the steps are at rounding level; tested against exact active-set enumeration) instead of the
authors' CVXPY call; the authors then zero weights below 10⁻³ without renormalising, here
the solution is kept as is; their eigenvalue clipping of a non-PSD ``Q`` is not needed
(``Q`` is a Gram matrix plus a non-negative diagonal).  Local steps are one mini-batch each
(the paper: one head epoch, then body epochs).  With ``λ = 0`` and one client per round the
collaboration weight is 1 and FedPAC is FedRep (tested bit for bit).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.heads import merge, partial_sgd, subset
from algorithms.engine.features import (all_rows_phase_parts, body_keys, class_sums, client_rows,
                                 feature_dim, features, head_keys,
                                 inert_without_body)
from algorithms.methods.prototypes.fedproto import pooled_prototypes, prototype_penalty, regularised_sgd
from pfl_theory.validation import nonnegative, positive, positive_int

#: most FISTA iterations of the collaboration QPs (it stops earlier once a step moves no
#: weight by more than 64 ulp; measured against exact enumeration: ≤ 1e-14, S ≤ 8)
QP_STEPS = 20000


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of each row of ``v [..., S]`` onto the probability simplex
    (sort-based: ``max(v − θ, 0)`` with the threshold θ of the largest feasible prefix)."""
    u = torch.sort(v, dim=-1, descending=True).values
    css = torch.cumsum(u, -1) - 1
    k = torch.arange(1, v.shape[-1] + 1, device=v.device, dtype=v.dtype)
    rho = (u - css / k > 0).sum(-1, keepdim=True)
    theta = torch.gather(css, -1, rho - 1) / rho.to(v.dtype)
    return torch.clamp(v - theta, min=0)


def simplex_qp(q: torch.Tensor, steps: int = QP_STEPS) -> torch.Tensor:
    """``argmin_{α ∈ Δ} αᵀ q α`` for each ``q [B, S, S]`` (symmetric PSD): FISTA from the
    uniform weights, step ``1/(2 λ_max)``, with the gradient-based adaptive restart of
    O'Donoghue & Candès (2015) per problem (linear convergence on ill-conditioned ``q``,
    where plain FISTA stalled at 1e-6 after 2,000 steps)."""
    s = q.shape[-1]
    lmax = torch.linalg.eigvalsh(q)[..., -1].clamp(min=torch.finfo(q.dtype).tiny)
    step = (1.0 / (2 * lmax))[:, None]
    alpha = torch.full(q.shape[:-1], 1.0 / s, dtype=q.dtype, device=q.device)
    y = alpha
    t = torch.ones(q.shape[0], 1, dtype=q.dtype, device=q.device)
    tol = 64 * torch.finfo(q.dtype).eps         # 1.4e-14 in float64: rounding-level steps
    for i in range(steps):
        grad = 2 * torch.bmm(q, y.unsqueeze(-1)).squeeze(-1)
        new = project_simplex(y - step * grad)
        restart = ((y - new) * (new - alpha)).sum(-1, keepdim=True) > 0
        t = torch.where(restart, torch.ones_like(t), t)
        t_next = (1 + torch.sqrt(1 + 4 * t * t)) / 2
        y = torch.where(restart, new, new + ((t - 1) / t_next) * (new - alpha))
        done = i % 50 == 49 and bool((new - alpha).abs().max() <= tol)
        alpha, t = new, t_next
        if done:                  # steps at rounding level: converged
            break
    return alpha


def collaboration_matrix(h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``Q_i = diag(V) + G_i`` for every participant i (``h [S, C, D]`` = ĥ, ``v [S]``):
    ``(G_i)_{jk} = ⟨ĥ_i − ĥ_j, ĥ_i − ĥ_k⟩`` (Frobenius, summed over classes) → ``[S, S, S]``."""
    flat = h.flatten(1)                                         # [S, C·D]
    diff = flat[:, None, :] - flat[None, :, :]                  # [i, j, ·] = ĥ_i − ĥ_j
    return torch.bmm(diff, diff.transpose(1, 2)) + torch.diag_embed(v).unsqueeze(0)


def feature_statistics(z, y, mask, c) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ĥ [P, C, D], V [P])`` of step 1 over the masked rows."""
    counts, sums = class_sums(z, y, mask, c)
    sq = class_sums((z * z).sum(-1, keepdim=True), y, mask, c)[1].squeeze(-1)   # Σ ‖z‖² per class
    n = counts.sum(1, keepdim=True).clamp(min=1)
    p = counts / n
    means = sums / counts.clamp(min=1).unsqueeze(-1)
    second = sq / counts.clamp(min=1)                           # E[‖z‖² | c]
    v = (p * second - p * p * (means * means).sum(-1)).sum(1) / n.squeeze(1)
    return p.unsqueeze(-1) * means, v


@register("fedpac")
@dataclass(frozen=True)
class FedPAC(Algorithm):
    """FedPAC (Xu, Tong, Huang, ICLR 2023, arXiv 2306.11867), Algorithm 1: λ = ``lam``
    (feature alignment), η = ``lr`` (head and body), τ = ``head_steps``, R =
    ``local_rounds`` (body steps), |D| = ``batch_size``, S = ``clients_per_round``."""

    client_models = ("personal",)

    lam: float = hp(1.0, "weight λ of the feature-alignment term (paper default 1)",
                    check=nonnegative, symbol="λ")
    lr: float = hp(0.02, "local SGD learning rate η (head and body)", check=positive, symbol="η")
    head_steps: int = hp(10, "SGD steps on the head (body fixed) before the body steps",
                         check=positive_int, symbol="τ")
    local_rounds: int = hp(10, "SGD steps R on the body (head fixed), one mini-batch each",
                           check=positive_int, symbol="R")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def inert_hyperparameters(self, model) -> dict[str, str]:
        """λ cannot change the result with an MLR: the feature-alignment term is a
        penalty of the body steps, and an MLR has no body (they update nothing)."""
        return inert_without_body(model, {"lam": "with --model mlr there is no body: the "
                                          "feature-alignment term acts on body steps that "
                                          "update nothing"})

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        head = head_keys(model)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        z = dict(device=fed.device, dtype=fed.dtype)
        protos = {"protos": torch.zeros(1, fed.num_classes, feature_dim(model), **z),
                  "known": torch.zeros(1, fed.num_classes, **z)}
        return State(0, seed, {"shared": subset(w, body_keys(model)),
                               "personal": broadcast(subset(w, head), fed.num_clients),
                               "protos": protos})

    def first_phase(self, state: State, fed, model) -> Phase:
        phase = train_phase(state, fed, self.head_steps + self.local_rounds, self.batch_size,
                            self.clients_per_round)
        batches, payload = all_rows_phase_parts(fed, phase.clients)
        return dataclasses.replace(phase, batches={**phase.batches, **batches}, payload=payload)

    def client_update(self, phase, model, view):
        if phase.name == "combine":                       # the server's combined head
            return {"personal": view.payload["head"]}, {}
        x, y = view.batches["sgd"]
        xa, ya, mask = client_rows(view)
        shared, personal = view.server["shared"], view.models["personal"]
        params = merge(shared, personal, n=x.shape[1])
        h, v = feature_statistics(features(model, params, xa), ya, mask, view.num_classes)
        tau = self.head_steps
        params = partial_sgd(model, params, list(personal), x[:tau], y[:tau], self.lr)
        protos = view.server["protos"]
        penalty = None
        if self.lam > 0 and bool(protos["known"].any()):
            penalty = prototype_penalty(protos["protos"], protos["known"], self.lam)
        params = regularised_sgd(model, params, list(shared), x[tau:], y[tau:], self.lr, penalty)
        counts, sums = class_sums(features(model, params, xa), ya, mask, view.num_classes)
        return {"personal": subset(params, personal)}, {
            "shared": subset(params, shared), "head": subset(params, personal),
            "counts": counts, "sums": sums, "h": h, "v": v}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "combine":
            return state, None
        up = phase.upload_clients()
        sizes = fed.train.counts[up.to(fed.device)]
        shared = weighted_mean(uploads["shared"], sizes) if uploads["shared"] else {}
        old = state.models["protos"]
        protos, known = pooled_prototypes(uploads["counts"], uploads["sums"], old["protos"][0],
                                          old["known"][0])
        alpha = simplex_qp(collaboration_matrix(uploads["h"], uploads["v"]))     # [S, S]
        heads: Params = {k: torch.tensordot(alpha, v, dims=1) for k, v in uploads["head"].items()}
        state = with_server(state, {"shared": shared,
                                    "protos": {"protos": protos[None], "known": known[None]}})
        return state, Phase("combine", up, payload={"head": heads}, uploaders=up[:0])

    def evaluated(self, state: State) -> dict:
        personal = state.models["personal"]
        n = next(iter(personal.values())).shape[0]
        return {"personalized": {k: v.contiguous() for k, v in
                                 merge(state.models["shared"], personal, n=n).items()}}
