"""PLGU-GRep — PLGU's scheme II built on FedRep (shared representation φ, personal heads).

Paper: X. Qu, H. Xu, M. Tang, J. Luo, et al., *How to Prevent the Poor Performance Clients
for Personalized Federated Learning?* (CVPR 2023), eqs. 8–13 and Algorithm 3; spec
docs/formulas.md §D.6, checks §E.D5.  Base algorithm: FedRep (Collins, Hassani, Mokhtari,
Shakkottai, ICML 2021), reused from :mod:`algorithms.engine.heads` (same state layout
``shared`` = body φ̃ ``[1, ...]``, ``personal`` = heads h_i ``[N, ...]``, same draws).

Round t, sampled clients C^t (|C^t| = ``clients_per_round``), one mini-batch per step:

* eq. 9 (K = ``head_steps`` steps): h_i ← h_i − η ∇_h F_B(h_i, φ̃^t), body fixed;
* eq. 10: ξ_{i,l} = ‖φ̃_{i,l} − φ̃^t_l‖ / dim(φ̃_l) over the body layers, normalised to
  Σ_l ξ_{i,l} = 1 (§D.4 choice); Λ_i = diag(ξ_i);
* on one further mini-batch B (the same for the next three lines):
  eq. 11: g = ∇_φ F_B(h_i^K, φ̃^t), φ_i = φ̃^t − η g;
  eq. 12: ε̃ = ρ sign(∇) Λ_i |∇|^{q−1} / (‖∇‖_q^q)^{1/p} with ∇ = ∇_φ F_B(h_i^K, φ_i);
  eq. 13: g̃ = ∇_φ F_B(h_i^K, φ_i + ε̃), φ̃_i = φ_i − η g̃;
* server: φ̃^{t+1} = mean_{i∈C^t} φ̃_i (``aggregation="uniform"`` as printed).

Evaluated: ``personalized`` = φ̃^t ∘ h_i (the global representation with the client's head,
as FedRep; the paper's "output θ̃_i^T" does not say which body).

Readings and departures (docs/formulas.md §D.2, §D.6):

* eq. 12's exponent: corrected 1/p by default, ``exponent="printed"`` gives p − 1.
* eq. 13 as printed updates with g (the eq. 11 gradient), leaving the just-computed g̃
  unused — then φ̃_i = φ̃^t − 2ηg and ρ has no effect.  Default ``eq13="corrected"`` uses
  g̃ (ERRATUM? reading); ``eq13="printed"`` implements the text.
* In eq. 10, φ̃_{i,l} is read as client i's representation from its *last participation*
  (state ``local_body``; initially the global initialisation, so ξ_i = 0 — no perturbation —
  until client i has trained once; at the start of a round the client's copy equals φ̃^t,
  which would make ξ ≡ 0).
* ρ = 0 with ``eq13="corrected"``: exactly FedRep with one body step (``local_rounds=1``)
  plus one extra SGD step on φ on the same mini-batch (§E.D5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round, hp,
                             local_lr_hp, register, sq_distance, validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.engine.heads import aggregate, check_aggregation, merge, partial_sgd, \
    split_keys, subset
from algorithms.methods.sam.plgu_lf import check_sam_options
from algorithms.methods.sam.plgu_scores import ZERO_POLICIES, personalization_scores
from algorithms.methods.sam.sam import sam_gradient
from pfl_theory.validation import positive_int

EQ13 = ("corrected", "printed")


@register("plgu-grep")
@dataclass(frozen=True)
class PLGUGRep(Algorithm):
    """PLGU-GRep (Qu et al., CVPR 2023), Algorithm 3, eqs. 8–13.  Paper symbols: η = ``lr``,
    K = ``head_steps`` (eq. 9), C = S = ``clients_per_round``, ρ = ``rho``, p = ``p_norm``,
    Λ_i = diag ξ_i (eq. 10); ``eq13`` and ``exponent`` choose the readings of eqs. 12–13."""

    client_models = ("personal", "local_body")
    #: the model ``pflt run`` uses when none is named: the scores need body layers below
    #: the head, which the one-layer default ``mlr`` does not have
    default_model: ClassVar[str] = "mlp"

    lr: float = local_lr_hp()
    head_steps: int = hp(10, "local SGD steps K on the head (body fixed) before the body update",
                         check=positive_int, symbol="K")
    batch_size: int = batch_size_hp()
    clients_per_round: int = hp(10, "clients S (= C) sampled per round", check=positive_int,
                                symbol="C")
    head_layers: int = hp(1, "number of last layers personalized (the head)", check=positive_int,
                          symbol="—")
    aggregation: str = hp("uniform", "server mean: 'uniform' (papers) or 'weighted' by samples",
                          symbol="—")
    rho: float = hp(0.05, "SAM radius ρ (0 removes the perturbation)", symbol="ρ")
    p_norm: float = hp(2.0, "ℓ_p norm of the SAM ball, p in (1, inf]", symbol="p")
    exponent: str = hp("corrected", "eq. 5 denominator exponent: 'corrected' (1/p) or 'printed' (p-1)",
                       symbol="—")
    eq13: str = hp("corrected", "PLGU-GRep eq. 13 gradient: 'corrected' (g̃, SAM) or 'printed' (g)",
                   symbol="—")
    zero_scores: str = hp("zeros", "ξ of a client whose scores are all 0: 'zeros' (no perturbation) or 'uniform'",
                          symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        check_aggregation(self.aggregation)
        check_sam_options(self.rho, self.p_norm, self.exponent)
        if self.eq13 not in EQ13:
            raise ValueError(f"eq13 must be one of {EQ13}, got {self.eq13!r}")
        if self.zero_scores not in ZERO_POLICIES:
            raise ValueError(f"zero_scores must be one of {ZERO_POLICIES}, got {self.zero_scores!r}")

    def body_layers(self, model) -> list[list[str]]:
        if self.head_layers >= len(model.layers):
            raise ValueError(f"head_layers={self.head_layers} leaves no representation layer in "
                             f"a model with L={len(model.layers)} layers")
        return [list(g) for g in model.layers[:len(model.layers) - self.head_layers]]

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        self.body_layers(model)
        body, head = split_keys(model, self.head_layers)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        n = fed.num_clients
        return State(0, seed, {"shared": subset(w, body), "personal": broadcast(subset(w, head), n),
                               "local_body": broadcast(subset(w, body), n)})

    def representation_update(self, model, params, body_keys, head_keys, xi, x, y):
        """eqs. 11–13 on one mini-batch ``x[C, B, ...]`` (head fixed); returns φ̃_i [C]."""
        head = subset(params, head_keys)
        g = subset(model.grad(params, x, y)[0], body_keys)
        phi = {k: params[k] - self.lr * g[k] for k in body_keys}               # eq. 11

        def grad_fn(q):
            return subset(model.grad({**q, **head}, x, y)[0], body_keys)

        res = sam_gradient(phi, grad_fn, rho=self.rho, p=self.p_norm, xi=xi,  # eq. 12
                           layers=self.body_layers(model), exponent=self.exponent)
        step = res.sam_grad if self.eq13 == "corrected" else g                 # eq. 13
        return {k: phi[k] - self.lr * step[k] for k in body_keys}

    def first_phase(self, state: State, fed, model) -> Phase:
        # same draws, same order as FedRep with local_rounds = 1
        return train_phase(state, fed, self.head_steps + 1, self.batch_size,
                           self.clients_per_round)

    def client_update(self, phase, model, view):
        """eqs. 9–13 for the client; keeps its head and φ̃_i, uploads φ̃_i."""
        x, y = view.batches["sgd"]
        shared, personal = view.server["shared"], view.models["personal"]
        body, head = list(shared), list(personal)
        params = merge(shared, personal, n=x.shape[1])
        params = partial_sgd(model, params, head, x[:self.head_steps], y[:self.head_steps],
                             self.lr)                                          # eq. 9
        xi = personalization_scores(view.models["local_body"], {k: v[0] for k, v in shared.items()},
                                    self.body_layers(model), on_zero=self.zero_scores)  # eq. 10
        phi = self.representation_update(model, params, body, head, xi,
                                         x[self.head_steps], y[self.head_steps])
        return {"personal": subset(params, head), "local_body": phi}, {"shared": phi}

    def server_aggregate(self, phase, state, uploads, fed, model):
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"shared": aggregate(uploads["shared"], counts,
                                                       self.aggregation)}), None

    def evaluated(self, state: State) -> dict:
        personal, shared = state.models["personal"], state.models["shared"]
        n = next(iter(personal.values())).shape[0]
        return {"personalized": {k: v.contiguous() for k, v in merge(shared, personal, n=n).items()}}

    def diagnostics(self, state: State, fed, model) -> dict:
        """Mean ‖φ̃_i − φ̃‖² of the clients' last local representations (eq. 10's numerator)."""
        d = sq_distance(state.models["local_body"], state.models["shared"])
        return {"representation_gap_sq": float(d.mean())}
