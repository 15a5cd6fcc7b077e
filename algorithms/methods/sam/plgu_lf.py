"""FedSAM and PLGU-LF (scheme I of PLGU: a global model plus personalized models).

* **PLGU** — X. Qu, H. Xu, M. Tang, J. Luo, et al., *How to Prevent the Poor Performance
  Clients for Personalized Federated Learning?* (CVPR 2023): "Personalize Locally,
  Generalize Universally".  Algorithm 1 (local routine), Algorithm 2 (PLGU-LF), eqs. 5–7;
  spec docs/formulas.md §D.3–D.5, checks §E.D5.
* **FedSAM** — Z. Qu, X. Li, R. Duan, Y. Liu, B. Tang, Z. Lu, *Generalized Federated
  Learning via Sharpness Aware Minimization*, ICML 2022 (arXiv 2206.02618); also
  D. Caldarola, B. Caputo, M. Ciccone, *Improving Generalization in Federated Learning by
  Seeking Flat Minima*, ECCV 2022 (arXiv 2203.11834).  FedAvg whose local steps are SAM
  steps (Foret et al., ICLR 2021).

FedSAM, round t: draw the same mini-batches and clients as :class:`algorithms.methods.averaging.fedavg.FedAvg`;
every sampled client runs ``local_rounds`` SAM steps ``w ← w − η ∇F_B(w + ε̃(w))`` with
``ε̃`` from eq. 3 (ℓ_p form of eq. 5 with Λ = I when ``p_norm ≠ 2``); the server takes the
sample-weighted mean (as FedAvg).  ρ = 0 ⇒ FedAvg exactly (same seed, same numbers).

PLGU-LF, round t (Algorithm 2), for the sampled clients C^t, |C^t| = ``clients_per_round``:

1. ξ_i = eq. 6 scores of θ̃_i against w̃^t (normalised to Σ_l ξ_{i,l} = 1, §D.4 choice);
2. L_Per = the D = ``personalized_layers`` layers of largest ξ_i (lower index wins ties),
   L_Uni = the rest;
3. θ̃_i^{t,0}: universal layers ← w̃^t, personalized layers kept from θ̃_i; w̃_i^{t,0} = w̃^t;
4. K = ``local_rounds`` iterations of Algorithm 1, one mini-batch B each:
   θ̃ ← θ̃ − η ∇F_B(θ̃) (plain SGD, all layers);
   ε̃ = eq. 5 at the global copy with Λ_i = diag(ξ_{i,l} · [l ∈ L_Uni])  (LWSAM on the
   universal layers; personalized layers of w̃ are not perturbed);
   w̃_i ← w̃_i − η ∇F_B(w̃_i + ε̃);
5. server: w̃^{t+1} = w̃^t + (1/C) Σ_i (w̃_i^{t,K} − w̃^t)  (the copy's w̃^{t+1} on the
   right-hand side is a typo, §D.5).

Readings and departures (docs/formulas.md §D.2–D.5):

* Exponent of eq. 5: the corrected 1/p is the default, ``exponent="printed"`` gives p − 1.
* Step 4 of Algorithm 1 as printed mixes θ̃ and w̃; we take the natural reading: the SAM
  gradient of the global copy, ε̃ computed from ∇F_B at w̃_i (§D.3).
* "Freeze/keep personalized layers" (step 3) is read as *kept* — not overwritten by the
  broadcast; all layers of θ̃ are then trained by step 4.  The text's D = 0 ⇒ FedSAM and
  D = L ⇒ FedAvg (§D.5) follow from perturbing only L_Uni: D = L gives no perturbation
  (the global update is exactly FedAvg of SGD deltas, uniform mean); D = 0 gives layer-wise
  SAM on all layers — exactly FedSAM's SAM step when ``layer_scaling="identity"`` (Λ = I on
  L_Uni), the eq. 5 scaling by ξ otherwise.  D also sets how many layers θ̃_i keeps: at D = L
  it receives nothing, so the personalized model is plain local training.
* ξ_i = 0 (θ̃_i = w̃, e.g. at round 0) means no perturbation (``on_zero="zeros"`` of
  :func:`algorithms.methods.sam.plgu_scores.personalization_scores`, §E.D4); the top-D tie-break then
  picks the first D layers.
* K counts mini-batch steps, not epochs; mini-batches are uniform with replacement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from algorithms.engine.steps import sgd_update
from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round, hp,
                             local_lr_hp, register, sq_distance, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.methods.sam.plgu_scores import personalization_scores, top_layers
from algorithms.methods.sam.sam import EXPONENTS, dual_exponent, sam_gradient
from pfl_theory.validation import nonnegative, positive_int

SCALINGS = ("scores", "identity")


def check_sam_options(rho: float, p_norm: float, exponent: str) -> None:
    """Validate the shared SAM hyper-parameters (ρ ≥ 0, p ∈ (1, ∞], exponent name)."""
    nonnegative("rho", rho)
    dual_exponent(p_norm)
    if exponent not in EXPONENTS:
        raise ValueError(f"exponent must be one of {EXPONENTS}, got {exponent!r}")


def sam_local_steps(model, params: Params, x: torch.Tensor, y: torch.Tensor, *, lr: float,
                    rho: float, p: float = 2.0, exponent: str = "corrected",
                    xi: torch.Tensor | None = None,
                    layers: Sequence[Sequence[str]] | None = None) -> Params:
    """One SAM/LWSAM step per mini-batch of ``x[R, N, B, ...]`` for all clients:
    ``θ ← θ − lr ∇F_B(θ + ε̃)`` with ε̃ = eq. 3 (``xi=None``) or eq. 5 (Λ_i = diag(xi[i]))."""
    for r in range(x.shape[0]):
        res = sam_gradient(params, lambda q, r=r: model.grad(q, x[r], y[r])[0], rho=rho,
                           p=p, xi=xi, layers=layers, exponent=exponent)
        params = {k: params[k] - lr * res.sam_grad[k] for k in params}
    return params


def plgu_local(model, theta: Params, w: Params, x: torch.Tensor, y: torch.Tensor, *,
               lr: float, rho: float, xi: torch.Tensor | None, layers,
               p: float = 2.0, exponent: str = "corrected") -> tuple[Params, Params]:
    """Algorithm 1 of PLGU for all clients: ``K = x.shape[0]`` iterations, each one plain
    SGD step on θ̃ and one LWSAM step on the global copy w̃ on the *same* mini-batch.
    Returns ``(θ̃^{K}, w̃^{K})``."""
    for k in range(x.shape[0]):
        g, _ = model.grad(theta, x[k], y[k])
        theta = sgd_update(theta, g, lr, in_place=k > 0)     # the caller's θ̃ not written
        res = sam_gradient(w, lambda q, k=k: model.grad(q, x[k], y[k])[0], rho=rho, p=p,
                           xi=xi, layers=layers, exponent=exponent)
        w = {n: w[n] - lr * res.sam_grad[n] for n in w}
    return theta, w


@dataclass(frozen=True)
class _SAMFields(Algorithm):
    """Shared fields: η = ``lr``, K = ``local_rounds``, |D| = ``batch_size``, C = S =
    ``clients_per_round``, ρ = ``rho``, p = ``p_norm`` (ℓ_p ball), ``exponent`` = eq. 5's
    denominator exponent reading."""

    lr: float = local_lr_hp()
    local_rounds: int = hp(20, "local steps K per round (one mini-batch each)", check=positive_int,
                           symbol="K")
    batch_size: int = batch_size_hp()
    clients_per_round: int = hp(10, "clients S (= C) sampled per round", check=positive_int,
                                symbol="C")
    rho: float = hp(0.05, "SAM radius ρ (0 removes the perturbation)", symbol="ρ")
    p_norm: float = hp(2.0, "ℓ_p norm of the SAM ball, p in (1, inf]", symbol="p")
    exponent: str = hp("corrected", "eq. 5 denominator exponent: 'corrected' (1/p) or 'printed' (p-1)",
                       symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        check_sam_options(self.rho, self.p_norm, self.exponent)

    def _check_clients(self, fed) -> None:
        check_clients_per_round(self.clients_per_round, fed)

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)


@register("fedsam")
@dataclass(frozen=True)
class FedSAM(_SAMFields):
    """FedSAM (Qu et al., ICML 2022; Caldarola, Caputo, Ciccone, ECCV 2022): FedAvg with SAM
    local steps (Foret et al., ICLR 2021); symbols as :class:`_SAMFields`."""

    def init(self, fed, model, seed: int) -> State:
        self._check_clients(fed)
        return State(0, seed, {"global": model.init(1, seed=seed, device=fed.device,
                                                   dtype=fed.dtype)})

    def client_update(self, phase, model, view):
        """K SAM steps from ``w^t``; uploads the local model."""
        x, y = view.batches["sgd"]
        w = sam_local_steps(model, broadcast(view.server["global"], x.shape[1]), x, y,
                            lr=self.lr, rho=self.rho, p=self.p_norm, exponent=self.exponent)
        return {}, {"global": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}


@register("plgu-lf")
@dataclass(frozen=True)
class PLGULF(_SAMFields):
    """PLGU-LF (Qu et al., CVPR 2023), Algorithm 2: symbols as :class:`_SAMFields`, D =
    ``personalized_layers``, Λ_i = ``layer_scaling`` (diag ξ_i of eq. 6 or I)."""

    client_models = ("personalized",)

    personalized_layers: int = hp(1, "D: layers of largest score ξ kept personal (not perturbed)",
                                  symbol="D")
    layer_scaling: str = hp("scores", "Λ on universal layers: 'scores' (diag ξ, eq. 5) or 'identity'",
                            symbol="Λ_i")

    def __post_init__(self):
        super().__post_init__()
        positive_int("personalized_layers", self.personalized_layers, minimum=0)
        if self.layer_scaling not in SCALINGS:
            raise ValueError(f"layer_scaling must be one of {SCALINGS}, got {self.layer_scaling!r}")

    def init(self, fed, model, seed: int) -> State:
        self._check_clients(fed)
        if self.personalized_layers > len(model.layers):
            raise ValueError(f"personalized_layers D={self.personalized_layers} exceeds the "
                             f"model's L={len(model.layers)} layers")
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"global": w, "personalized": broadcast(w, fed.num_clients)})

    def layer_plan(self, model, theta: Params, w: Params) -> tuple[torch.Tensor, torch.Tensor]:
        """Steps 1–2: ``(ξ [C, L], L_Per mask [C, L])`` for the clients in ``theta``."""
        xi = personalization_scores(theta, {k: v[0] for k, v in w.items()}, model.layers)
        return xi, top_layers(xi, self.personalized_layers)

    def lambda_diag(self, xi: torch.Tensor, per_mask: torch.Tensor) -> torch.Tensor:
        """Λ_i's diagonal on the global copy: ξ (or 1) on L_Uni, 0 on L_Per."""
        base = xi if self.layer_scaling == "scores" else torch.ones_like(xi)
        return torch.where(per_mask, torch.zeros_like(base), base)

    def client_update(self, phase, model, view):
        """Steps 1–4 for the client's θ̃_i and global copy; uploads ``w̃_i^{t,K}``."""
        x, y = view.batches["sgd"]
        w, theta = view.server["global"], dict(view.models["personalized"])
        xi, per = self.layer_plan(model, theta, w)
        c = x.shape[1]
        for l, group in enumerate(model.layers):  # step 3: receive universal layers
            keep = per[:, l]
            for k in group:
                theta[k] = torch.where(keep.reshape(-1, *[1] * (theta[k].dim() - 1)),
                                       theta[k], w[k].expand_as(theta[k]))
        theta, w_loc = plgu_local(model, theta, broadcast(w, c), x, y, lr=self.lr,
                                  rho=self.rho, xi=self.lambda_diag(xi, per),
                                  layers=model.layers, p=self.p_norm, exponent=self.exponent)
        return {"personalized": theta}, {"global": w_loc}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """Step 5: ``w̃^{t+1} = w̃^t + (1/C) Σ_i (w̃_i^{t,K} − w̃^t)``."""
        w, w_loc = state.models["global"], uploads["global"]
        return with_server(state, {"global": {k: w[k] + (w_loc[k] - w[k]).mean(0, keepdim=True)
                                              for k in w}}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        """Mean ‖θ̃_i − w̃‖² over clients (how far personalization has moved)."""
        d = sq_distance(state.models["personalized"], state.models["global"])
        return {"personalized_gap_sq": float(d.mean())}
