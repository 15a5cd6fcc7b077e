"""FedAMP — Y. Huang, L. Chu, Z. Zhou, L. Wang, J. Liu, J. Pei, Y. Zhang, *Personalized
Cross-Silo Federated Learning on Non-IID Data*, AAAI 2021 (arXiv 2007.03797).

Objective ``Σ_i F_i(w_i) + λ Σ_{i<j} A(‖w_i − w_j‖²)`` with the attention-inducing
``A(x) = 1 − exp(−x/σ)``.  Attentive message passing, round ``t`` (``S`` clients sampled
uniformly, all batched):

1. the server holds every client's latest model ``w_j`` (``bank``) and forms, for each
   participant, its *cloud model* (eq. 6–7)

       u_i = ξ_ii w_i + Σ_{j≠i} ξ_ij w_j,   ξ_ij = α A'(‖w_i − w_j‖²) = (α/σ) exp(−‖w_i − w_j‖²/σ),
       ξ_ii = 1 − Σ_{j≠i} ξ_ij                                                     (``fedamp``)

   or, for deep networks, HeurFedAMP's attention (§5): ``ξ_ij = (1 − ξ_ii)
   softmax_{j≠i}(σ cos(w_i, w_j))`` with a fixed self-attention ``ξ_ii`` (``heuristic``) —
   all pairwise distances / cosines of the participants against the bank in one product;
2. each participant starts from ``u_i`` and runs ``R`` SGD steps (lr η) on
   ``F_i(w) + (λ/(2α)) ‖w − u_i‖²`` (eq. 8, one mini-batch per step); it keeps and uploads
   ``w_i``, which the server stores in the bank.

Evaluated: ``personalized`` = the clients' models ``w_i`` (never-sampled clients keep
``w^0``).  Departures: local steps instead of the exact proximal solve; the paper's
clients all take part each round (``S = N`` reproduces that).  ``fedamp`` needs
``Σ_{j≠i} ξ_ij ≤ 1`` (the paper's condition on α): ``(N − 1) α/σ > 1`` is refused at
``init``.  Defaults are toolkit choices (α/σ = 0.01, so up to 101 clients; λ = 1):
the paper's per-dataset values are not in its text.  Reduction (tested): ``heuristic``
with ``ξ_ii = 1`` and ``λ = 0`` is local training of the participants, bit for bit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from algorithms.engine.base import (NO_SYMBOL, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, flatten, hp, local_lr_hp, local_rounds_hp,
                             one_of, register, unflatten, validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.steps import local_sgd, prox_steps
from pfl_theory.validation import nonnegative, positive


def _unit_interval(name, value):
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def attention_weights(flat: torch.Tensor, chosen: torch.Tensor, rule: str, *, alpha: float,
                      sigma: float, self_weight: float) -> torch.Tensor:
    """``ξ [S, N]`` for the participants ``chosen`` against every model ``flat [N, d]``
    (row ``r`` is participant ``chosen[r]``; its own column holds ``ξ_ii``)."""
    mine = flat[chosen]
    own = torch.zeros(chosen.numel(), flat.shape[0], dtype=torch.bool, device=flat.device)
    own[torch.arange(chosen.numel(), device=flat.device), chosen] = True
    if rule == "fedamp":
        d2 = (mine.square().sum(1, keepdim=True) + flat.square().sum(1)[None, :]
              - 2 * mine @ flat.T).clamp(min=0)                      # ‖w_i − w_j‖²
        xi = (alpha / sigma) * torch.exp(-d2 / sigma)
        xi = xi.masked_fill(own, 0.0)
        return xi + own * (1 - xi.sum(1, keepdim=True))
    norms = flat.norm(dim=1).clamp(min=torch.finfo(flat.dtype).tiny)
    cos = (mine @ flat.T) / (norms[chosen][:, None] * norms[None, :])
    att = torch.softmax((sigma * cos).masked_fill(own, float("-inf")), dim=1)
    att = torch.nan_to_num(att, nan=0.0)                             # N = 1: no other client
    return torch.where(own, torch.full_like(att, self_weight), (1 - self_weight) * att)


@register("fedamp")
@dataclass(frozen=True)
class FedAMP(Algorithm):
    """FedAMP (Huang et al., AAAI 2021, arXiv 2007.03797), Algorithm 1 / HeurFedAMP:
    λ = ``lam``, α_k = ``alpha``, σ = ``sigma``, ξ_ii = ``self_weight`` (heuristic), η =
    ``lr``, R = ``local_rounds``, |D| = ``batch_size``, S = ``clients_per_round``."""

    server_rows = {"bank": 0}
    client_models = ("personalized",)

    lam: float = hp(1.0, "weight λ of the attention-inducing penalty", check=nonnegative,
                    symbol="λ")
    alpha: float = hp(1e3, "message-passing step α_k (ξ_ij = α A'(‖w_i − w_j‖²))",
                      check=positive, symbol="α_k")
    sigma: float = hp(1e5, "σ of A(x) = 1 − exp(−x/σ) (heuristic: the cosine scale)",
                      check=positive, symbol="σ")
    attention: str = hp("fedamp", "'fedamp' (eq. 7) or 'heuristic' (HeurFedAMP, cosine softmax)",
                        check=one_of("fedamp", "heuristic"), symbol=NO_SYMBOL)
    self_weight: float = hp(0.5, "HeurFedAMP's self-attention ξ_ii", check=_unit_interval,
                            symbol="ξ_ii")
    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        if self.attention == "fedamp" and (fed.num_clients - 1) * self.alpha / self.sigma > 1:
            raise ValueError(f"alpha/sigma = {self.alpha / self.sigma:g} is too large for "
                             f"{fed.num_clients} clients: the self-weights ξ_ii would be negative "
                             f"(need (N - 1) alpha/sigma <= 1)")
        w = broadcast(model.init(1, seed=seed, device=fed.device, dtype=fed.dtype),
                      fed.num_clients)
        return State(0, seed, {"bank": w, "personalized": {k: v.clone() for k, v in w.items()}})

    def first_phase(self, state: State, fed, model) -> Phase:
        """The draws, then the cloud models ``u_i`` of the participants (payload)."""
        phase = train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)
        bank = state.models["bank"]
        flat = flatten(bank)
        xi = attention_weights(flat, phase.clients.to(flat.device), self.attention,
                               alpha=self.alpha, sigma=self.sigma, self_weight=self.self_weight)
        return dataclasses.replace(phase, payload={"cloud": unflatten(xi @ flat, bank)})

    def client_update(self, phase, model, view):
        """R steps on ``F_i(w) + (λ/(2α))‖w − u_i‖²`` from ``u_i``."""
        x, y = view.batches["sgd"]
        u = view.payload["cloud"]
        if self.lam == 0:
            w = local_sgd(model, u, x, y, self.lr)
        else:
            w = u
            for r in range(x.shape[0]):
                w = prox_steps(model, w, u, x[r], y[r], lam=self.lam / self.alpha, lr=self.lr,
                               steps=1)
        return {"personalized": w}, {"model": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        up = phase.upload_clients().to(fed.device)
        bank = {k: v.index_copy(0, up, uploads["model"][k])
                for k, v in state.models["bank"].items()}
        return with_server(state, {"bank": bank}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"]}
