"""FedProx — T. Li, A. K. Sahu, M. Zaheer, M. Sanjabi, A. Talwalkar, V. Smith, *Federated
Optimization in Heterogeneous Networks*, MLSys 2020 (arXiv 1812.06127), Algorithm 2.

Round ``t``: the server samples ``S`` clients and sends ``w^t``; client ``k`` approximately
minimises the proximal local objective (eq. 2)

    h_k(w; w^t) = F_k(w) + μ/2 ‖w − w^t‖²

by ``R`` mini-batch SGD steps (the paper's local solver; its γ-inexactness is not measured)

    w ← w − η (∇F̃_k(w) + μ (w − w^t)),

and the server sets ``w^{t+1}`` to the sample-weighted mean of the returned models.

Departures from the paper: (1) no systems heterogeneity — every sampled client runs the
same ``R`` steps (the paper's stragglers doing variable work are not simulated); (2) the
server mean is weighted by sample counts ``n_k`` with uniform sampling, as in the paper's
experiments and code (Algorithm 2 samples ``∝ p_k`` and averages uniformly — the same
expectation).  μ = 0 is FedAvg (McMahan et al., AISTATS 2017) bit for bit (tested): the
proximal term is then ``+ 0·(w − w^t)``, an exact zero.  Default μ = 1: the value the
paper reports best on its Synthetic and MNIST experiments (appendix, hyper-parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.engine.base import (Params, State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, local_lr_hp, register,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from pfl_theory.validation import nonnegative, positive_int


def proximal_sgd(model, params: Params, anchor: Params, x, y, *, lr: float, mu: float) -> Params:
    """One SGD step per mini-batch ``x[R, N, B, ...]`` on ``F̃_k(w) + μ/2 ‖w − anchor‖²``
    (FedProx eq. 2): ``w ← w − η (∇F̃_k(w) + μ (w − anchor))``.  μ = 0 gives
    :func:`algorithms.engine.steps.local_sgd`'s iterates bit for bit."""
    for r in range(x.shape[0]):
        g, _ = model.grad(params, x[r], y[r])
        params = {k: params[k] - lr * (g[k] + mu * (params[k] - anchor[k])) for k in params}
    return params


@register("fedprox")
@dataclass(frozen=True)
class FedProx(Algorithm):
    """FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, MLSys 2020), Algorithm 2.
    Paper symbols: μ = ``mu`` (proximal coefficient), η = ``lr``, E ↔ R = ``local_rounds``
    (local SGD steps, one mini-batch each), |D| = ``batch_size``, K ↔ S =
    ``clients_per_round``."""

    mu: float = hp(1.0, "proximal coefficient μ of h_k(w; w^t) = F_k(w) + μ/2‖w − w^t‖² "
                   "(0: FedAvg)", check=nonnegative, symbol="μ")
    lr: float = local_lr_hp()
    local_rounds: int = hp(20, "local SGD steps R per round (one mini-batch each)",
                           check=positive_int, symbol="E")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        return State(0, seed, {"global": model.init(1, seed=seed, device=fed.device,
                                                   dtype=fed.dtype)})

    def first_phase(self, state: State, fed, model) -> Phase:
        return train_phase(state, fed, self.local_rounds, self.batch_size, self.clients_per_round)

    def client_update(self, phase, model, view):
        """R proximal SGD steps from the broadcast ``w^t``; uploads the local model."""
        x, y = view.batches["sgd"]
        anchor = broadcast(view.server["global"], x.shape[1])
        return {}, {"global": proximal_sgd(model, anchor, anchor, x, y, lr=self.lr, mu=self.mu)}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """``w^{t+1} = Σ n_k w_k / Σ n_k`` over the uploads."""
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"global": weighted_mean(uploads["global"], counts)}), None

    def evaluated(self, state: State) -> dict:
        return {"global": state.models["global"]}
