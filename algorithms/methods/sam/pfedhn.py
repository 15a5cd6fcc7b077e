"""pFedHN and PLGU-GHN — a server hypernetwork generates every client's target model.

* **pFedHN** — A. Shamsian, A. Navon, E. Fetaya, G. Chechik, *Personalized Federated
  Learning using Hypernetworks*, ICML 2021 (arXiv 2103.04628).
* **PLGU-GHN** — X. Qu, H. Xu, M. Tang, J. Luo, et al., *How to Prevent the Poor Performance
  Clients for Personalized Federated Learning?* (CVPR 2023), appendix C, eqs. 22–26 and
  Algorithm 4; spec docs/formulas.md §D.7.

Hypernetwork (eq. 22): client embedding v_i ∈ R^e (``embed_dim``), an MLP of ``hn_layers``
ReLU layers of width ``hn_hidden``, then one linear output head per target parameter:
w_i = h(v_i; φ), reshaped to the target model's parameter dict.  All clients batched.

Round t, sampled clients C^t (|C^t| = ``clients_per_round``):

1. w_i^{t,0} = h(v_i; φ^t); K = ``local_rounds`` plain SGD steps (lr η) → w_i^{t,K};
   Δ_i = w_i^{t,0} − w_i^{t,K};
2. pFedHN: φ ← φ − α (1/|C^t|) Σ_i (∂w_i/∂φ)^T Δ_i and v_i ← v_i − α (∂w_i/∂v_i)^T Δ_i
   (α = ``hn_lr``);
3. PLGU-GHN (eq. 24–25): g = (1/|C^t|) Σ_i (∂w_i/∂φ)^T Δ_i at φ, ε = ρ g/‖g‖_2 (eq. 3;
   ℓ_p / printed exponent selectable as in :mod:`algorithms.methods.sam.sam`, Λ = I), then the same
   vector–Jacobian products evaluated at φ + ε update φ and v_i.  ρ = 0 ⇒ pFedHN exactly.

Evaluated: ``personalized`` = h(v_i; φ) for every client (the model it would receive).

Client/server split: the hypernetwork φ and the embeddings v_i live on the server; it sends
each sampled client w_i^{t,0} = h(v_i; φ^t) and receives Δ_i.

Readings and departures:

* Sign: eqs. 24–25 print Δw = w^K − w^0 and use the product as a descent direction; read
  literally that would *ascend*.  We follow the pFedHN code (Δ = initial − final), under
  which the update moves h(v_i; φ) towards the locally trained w_i^K (docs/formulas.md §D.7 note).
* pFedHN updates the HN after every single client with Adam/SGD+momentum; here all sampled
  clients are processed at once with plain SGD: the φ gradient is averaged over C^t (eq. 24),
  each v_i takes its own full step (eq. 25).  No weight decay.
* Embeddings start N(0, 1) (``torch.nn.Embedding`` default in the pFedHN code); every HN
  weight U(±1/√fan_in) from an explicit generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from algorithms.engine.base import (Params, State, batch_size_hp, check_clients_per_round, hp,
                             local_lr_hp, register, validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, train_phase, with_server
from algorithms.methods.sam.plgu_lf import check_sam_options
from algorithms.methods.sam.sam import perturbation
from algorithms.engine.steps import local_sgd
from pfl_theory.validation import positive, positive_int


def init_hypernetwork(target: Params, *, embed_dim: int, hidden: int, layers: int,
                      gen: torch.Generator) -> Params:
    """HN parameters ``[1, ...]`` (float64, CPU) for a target model whose one-row parameters
    are ``target`` (``[1, ...]``).  Output head of target parameter ``name`` with shape ``s``:
    ``out:name.weight [1, hidden, *s]``, ``out:name.bias [1, *s]`` (shapes live in the state)."""
    def uniform(shape, fan_in):
        return ((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1)
                / math.sqrt(fan_in)).unsqueeze(0)

    hn: Params = {}
    width = embed_dim
    for j in range(layers):
        hn[f"mlp{j}.weight"] = uniform((width, hidden), width)
        hn[f"mlp{j}.bias"] = uniform((hidden,), width)
        width = hidden
    for name, v in target.items():
        hn[f"out:{name}.weight"] = uniform((width, *v.shape[1:]), width)
        hn[f"out:{name}.bias"] = uniform(tuple(v.shape[1:]), width)
    return hn


def target_names(hn: Params) -> list[str]:
    """Names of the target parameters the hypernetwork ``hn`` generates."""
    return [k[4:-len(".weight")] for k in hn if k.startswith("out:") and k.endswith(".weight")]


def hn_forward(hn: Params, v: torch.Tensor) -> Params:
    """Target parameters ``{name: [C, *shape]}`` generated from embeddings ``v[C, e]`` (eq. 22)."""
    h, j = v, 0
    while f"mlp{j}.weight" in hn:
        h = torch.relu(h @ hn[f"mlp{j}.weight"][0] + hn[f"mlp{j}.bias"][0])
        j += 1
    return {name: torch.tensordot(h, hn[f"out:{name}.weight"][0], dims=1) + hn[f"out:{name}.bias"][0]
            for name in target_names(hn)}


def hn_vjp(hn: Params, v: torch.Tensor, delta: Params) -> tuple[Params, torch.Tensor]:
    """``(Σ_i (∂w_i/∂φ)^T Δ_i, rows (∂w_i/∂v_i)^T Δ_i)`` at (φ = ``hn``, ``v``): one backward."""
    with torch.enable_grad():
        leaves = {k: t.detach().requires_grad_(True) for k, t in hn.items()}
        vl = v.detach().requires_grad_(True)
        out = hn_forward(leaves, vl)
        names = list(out)
        grads = torch.autograd.grad([out[k] for k in names], list(leaves.values()) + [vl],
                                    grad_outputs=[delta[k] for k in names])
    return dict(zip(leaves, grads[:-1])), grads[-1]


@register("pfedhn")
@dataclass(frozen=True)
class PFedHN(Algorithm):
    """pFedHN (Shamsian, Navon, Fetaya, Chechik, ICML 2021).  Paper symbols: η = ``lr``
    (client SGD), K = ``local_rounds``, α = ``hn_lr`` (hypernetwork and embedding step), v_i ∈
    R^e with e = ``embed_dim``, C = S = ``clients_per_round``."""

    server_rows = {"embeddings": 0}

    lr: float = local_lr_hp()
    local_rounds: int = hp(20, "local SGD steps K per round (one mini-batch each)",
                           check=positive_int, symbol="K")
    batch_size: int = batch_size_hp()
    clients_per_round: int = hp(10, "clients S (= C) sampled per round", check=positive_int,
                                symbol="C")
    hn_lr: float = hp(0.3, "hypernetwork / embedding learning rate α", check=positive, symbol="α")
    embed_dim: int = hp(8, "client embedding dimension e", check=positive_int, symbol="e")
    hn_hidden: int = hp(64, "hidden width of the hypernetwork MLP", check=positive_int, symbol="—")
    hn_layers: int = hp(2, "hidden ReLU layers of the hypernetwork MLP", symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        positive_int("hn_layers", self.hn_layers, minimum=0)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        gen = torch.Generator().manual_seed(seed)
        target = model.init(1, seed=seed, dtype=torch.float64)
        hn = init_hypernetwork(target, embed_dim=self.embed_dim, hidden=self.hn_hidden,
                               layers=self.hn_layers, gen=gen)
        v = torch.randn(fed.num_clients, self.embed_dim, generator=gen, dtype=torch.float64)
        move = dict(device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"hypernetwork": {k: t.to(**move) for k, t in hn.items()},
                               "embeddings": {"v": v.to(**move)}})

    def hn_gradient(self, hn: Params, v: torch.Tensor, delta: Params) -> tuple[Params, torch.Tensor]:
        """pFedHN's HN gradient surrogate (mean over the C clients) and embedding gradients."""
        g_hn, g_v = hn_vjp(hn, v, delta)
        return {k: g / v.shape[0] for k, g in g_hn.items()}, g_v

    def first_phase(self, state: State, fed, model) -> Phase:
        phase = train_phase(state, fed, self.local_rounds, self.batch_size,
                            self.clients_per_round)
        v = state.models["embeddings"]["v"][phase.clients.to(fed.device)]
        return Phase(phase.name, phase.clients, phase.batches,
                     {"w0": hn_forward(state.models["hypernetwork"], v)}, send=())

    def client_update(self, phase, model, view):
        """K SGD steps from the generated ``w_i^{t,0}``; uploads Δ_i = initial − final."""
        x, y = view.batches["sgd"]
        w0 = view.payload["w0"]
        wk = local_sgd(model, w0, x, y, self.lr)
        return {}, {"delta": {k: w0[k] - wk[k] for k in w0}}       # initial − final (pFedHN code)

    def server_aggregate(self, phase, state, uploads, fed, model):
        """Step 2 (pFedHN) / eqs. 24–25 (PLGU-GHN) on the clients' Δ_i."""
        chosen = phase.upload_clients().to(fed.device)
        hn, emb = state.models["hypernetwork"], state.models["embeddings"]["v"]
        v = emb[chosen]
        g_hn, g_v = self.hn_gradient(hn, v, uploads["delta"])
        return with_server(state, {
            "hypernetwork": {k: hn[k] - self.hn_lr * g_hn[k] for k in hn},
            "embeddings": {"v": emb.index_copy(0, chosen, v - self.hn_lr * g_v)}}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": hn_forward(state.models["hypernetwork"],
                                           state.models["embeddings"]["v"])}


@register("plgu-ghn")
@dataclass(frozen=True)
class PLGUGHN(PFedHN):
    """PLGU-GHN (Qu et al., CVPR 2023, appendix C, eqs. 22–26, Algorithm 4): pFedHN's
    symbols plus ρ = ``rho``, p = ``p_norm`` and the eq. 5 ``exponent`` reading (Λ = I)."""

    rho: float = hp(0.05, "SAM radius ρ (0 removes the perturbation)", symbol="ρ")
    p_norm: float = hp(2.0, "ℓ_p norm of the SAM ball, p in (1, inf]", symbol="p")
    exponent: str = hp("corrected", "eq. 5 denominator exponent: 'corrected' (1/p) or 'printed' (p-1)",
                       symbol="—")

    def __post_init__(self):
        super().__post_init__()
        check_sam_options(self.rho, self.p_norm, self.exponent)

    def hn_gradient(self, hn: Params, v: torch.Tensor, delta: Params) -> tuple[Params, torch.Tensor]:
        """eq. 24: ε = ρ g/‖g‖ from pFedHN's g at φ, then both products at φ + ε (eq. 25 for v)."""
        g_hn, _ = super().hn_gradient(hn, v, delta)
        eps = perturbation(g_hn, rho=self.rho, p=self.p_norm, exponent=self.exponent)
        return super().hn_gradient({k: hn[k] + eps[k] for k in hn}, v, delta)
