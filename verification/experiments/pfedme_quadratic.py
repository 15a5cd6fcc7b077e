"""pFedMe theory experiments on quadratic clients: the engine runs behind docs/formulas.md
§E.B items 6–9 (used by :mod:`verification.checks.pfedme_algorithm`,
:mod:`verification.checks.bounds_pfedme`, :mod:`verification.checks.bounds_pfedme_nonconvex`,
:mod:`verification.experiments.bound_runs` and the figure script :mod:`paper_figures.pfedme_rates`).

Paper: C. T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with Moreau
Envelopes*, NeurIPS 2020 (arXiv 2006.08848); Theorems 1–2 (docs/formulas.md §B.6).

Clients are :class:`algorithms.engine.models.QuadraticMean` (``f_i(θ) = ½‖θ − x̄_i‖² + v_i/2``,
float64, :func:`quadratic_federation`), where the Moreau envelope, the prox and the optimum
are closed forms: the strongly convex experiments (Theorem 1, E.B6–B7:
:func:`strongly_convex_run`, :func:`floor_vs_delta`, :func:`floor_vs_sampling`), the
personalized-model ball (Theorems 1b/2b, E.B9: :func:`personalized_ball`) and, with the
non-convex :class:`CosineQuadratic` clients, Theorem 2 (E.B8: :func:`nonconvex_run`).
The pFedMe Table 1 reproduction is in :mod:`verification.experiments.pfedme_table1`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from algorithms.engine.base import State, broadcast
from algorithms.engine.models import QuadraticMean
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory.threads import single_threaded
from pfl_theory.validation import positive, positive_int
from synthetic.federation import compute_device


# ------------------------------------------------- quadratic clients (§E.B6, B7, B9)
def quadratic_federation(*, num_clients: int = 10, dim: int = 5, samples: int = 40,
                         spread: float = 2.0, noise: float = 1.0, sizes=None, seed: int = 0):
    """Clients for :class:`algorithms.engine.models.QuadraticMean`: client ``i`` has samples
    ``x = c_i + noise·ε`` with centres ``c_i ~ N(0, spread² I)``; then
    ``f_i(θ) = ½‖θ − x̄_i‖² + v_i/2`` (μ = L = 1) over its training samples.  ``noise = 0``
    gives a noise-free gradient oracle (every mini-batch gradient is exact, γ_f = 0).
    ``sizes`` (optional, per client) overrides ``samples``.  float64 on the CPU."""
    from synthetic.federation import Federation

    n = positive_int("num_clients", num_clients)
    d = positive_int("dim", dim)
    sizes = [positive_int("samples", samples, minimum=2)] * n if sizes is None else \
        [positive_int("size", s, minimum=2) for s in sizes]
    if len(sizes) != n:
        raise ValueError(f"need {n} sizes, got {len(sizes)}")
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, float(spread), (n, d))
    xs = [c + float(noise) * rng.normal(size=(m, d)) for c, m in zip(centres, sizes)]
    ys = [np.zeros(m, dtype=np.int64) for m in sizes]
    return Federation.from_client_arrays(xs, ys, num_classes=2, train_fraction=0.5, seed=seed,
                                         device=compute_device(), dtype=torch.float64, name="quadratic")


def client_means(fed) -> torch.Tensor:
    """``x̄_i`` over each client's training samples, ``[N, d]``."""
    tr = fed.train
    return torch.stack([tr.x[o:o + c].mean(0) for o, c in zip(tr.offsets.tolist(),
                                                               tr.counts.tolist())])


def client_variances(fed) -> torch.Tensor:
    """``v_i = (1/n_i) Σ_j ‖x_ij − x̄_i‖²`` (one sample's gradient variance γ_{f,i}²)."""
    tr = fed.train
    return torch.stack([((tr.x[o:o + c] - tr.x[o:o + c].mean(0)) ** 2).sum(1).mean()
                        for o, c in zip(tr.offsets.tolist(), tr.counts.tolist())])


def quadratic_envelope_gap(w: torch.Tensor, means: torch.Tensor, lam: float) -> torch.Tensor:
    """``F(w) − F*`` for QuadraticMean clients with uniform weights (docs/formulas.md §B.3 DERIVED):
    ``F_i(w) = μ_F/2 ‖w − x̄_i‖² + v_i/2`` with ``μ_F = λ/(1+λ)``, so
    ``F(w) − F* = μ_F/2 ‖w − w*‖²``, ``w* = mean_i x̄_i``.  ``w`` is ``[..., d]``."""
    mu_f = lam / (1.0 + lam)
    return 0.5 * mu_f * ((w - means.mean(0)) ** 2).sum(-1)


def exact_prox_pfedme(*, lam: float, lr: float, local_rounds: int = 1, batch_size: int = 5,
                      beta: float = 1.0, clients_per_round: int, aggregation: str = "uniform"
                      ) -> PFedMe:
    """pFedMe whose inner solve is the exact prox of the mini-batch loss for QuadraticMean
    clients: one inner step with ``η_p = 1/(1+λ)`` maps any θ to ``(x̄_D + λw)/(1+λ)``
    (the contraction factor ``1 − η_p(1+λ)`` is 0), i.e. ν = 0 in eq. (8)."""
    return PFedMe(lam=lam, lr=lr, personal_lr=1.0 / (1.0 + lam), inner_steps=1,
                  local_rounds=local_rounds, batch_size=batch_size, beta=beta,
                  clients_per_round=clients_per_round, aggregation=aggregation)


def start_state(alg, fed, w0: torch.Tensor, seed: int) -> State:
    """pFedMe's initial state with global model ``w0`` ``[d]`` instead of the model init."""
    w = {"theta": w0.reshape(1, -1).to(fed.dtype)}
    n = fed.num_clients
    return State(0, seed, {"global": w, "personalized": broadcast(w, n), "local": broadcast(w, n)})


@single_threaded
def global_trajectory(alg, fed, *, rounds: int, seed: int, w0: torch.Tensor,
                      record=("global",), model=None) -> dict[str, torch.Tensor]:
    """Run ``rounds`` rounds from ``w0``; returns ``{name: [rounds+1, ...]}`` of the recorded
    models' ``theta`` (index t = after t rounds); ``model`` defaults to QuadraticMean."""
    model = QuadraticMean(fed.feature_shape[0]) if model is None else model
    state = start_state(alg, fed, w0, seed)
    out = {k: [state.models[k]["theta"].clone()] for k in record}
    for _ in range(positive_int("rounds", rounds)):
        state = alg.round(state, fed, model)
        for k in record:
            out[k].append(state.models[k]["theta"].clone())
    return {k: torch.stack(v) for k, v in out.items()}


def averaged_iterates(ws: torch.Tensor, eta_avg: float, mu_f: float) -> torch.Tensor:
    """``w̄_T = Σ_{t<T} α_t w^t / A_T`` with ``α_t = (1 − η μ_F/2)^{−(t+1)}`` (Theorem 1),
    for every ``T = 1 … len(ws)``; ``ws`` is ``[T, d]``.  ``eta_avg`` is the step in α_t
    (see :func:`strongly_convex_run` for the reading)."""
    a = 1.0 - positive("eta_avg", eta_avg) * positive("mu_f", mu_f) / 2.0
    if not 0.0 < a < 1.0:
        raise ValueError(f"need 0 < 1 - eta*mu_F/2 < 1, got {a}")
    t = torch.arange(ws.shape[0], dtype=torch.float64)
    # weights relative to the largest one keep the sums finite for long runs
    logw = -(t + 1) * math.log(a)
    wts = torch.exp(logw - logw[-1])
    num = torch.cumsum(wts[:, None] * ws.to(torch.float64), 0)
    return num / torch.cumsum(wts, 0)[:, None]


@single_threaded
def strongly_convex_run(*, lam: float = 4.0, lr: float = 0.05, local_rounds: int = 5,
                        beta: float = 1.0, batch_size: int = 5, noise: float = 0.0,
                        rounds: int = 200, clients: int = 10, dim: int = 5, seed: int = 0,
                        start_distance: float = 10.0, clients_per_round: int | None = None
                        ) -> dict[str, Any]:
    """Theorem 1 experiment (E.B7): pFedMe with exact mini-batch prox, S = N, uniform
    aggregation, on QuadraticMean clients.  Returns the gaps ``F(w^t) − F*`` (last
    iterate) and ``F(w̄_T) − F*`` (α_t-weighted average) for ``T = 1 … rounds``, the exact
    per-round contraction ``q = 1 − β(1 − (1 − ημ_F)^R)`` of the noise-free last iterate,
    δ² (exact: ``E‖θ̃ − θ̂‖² = mean_i v_i / (|D|(1+λ)²)``, mini-batches with replacement),
    and σ²_{F,1}.  ``clients_per_round`` (default N) samples S < N clients per round.
    Reading: α_t uses the effective per-round step ``η̃ = ηβR`` (the step
    the exponent e^{−η̂₁μ_F T/2} is stated in, η̂₁ ≥ ηβR); the printed α_t has η."""
    fed = quadratic_federation(num_clients=clients, dim=dim, noise=noise, seed=seed)
    alg = exact_prox_pfedme(lam=lam, lr=lr, local_rounds=local_rounds, batch_size=batch_size,
                            beta=beta, clients_per_round=clients_per_round or clients)
    means = client_means(fed)
    g = torch.Generator().manual_seed(seed + 1)
    direction = torch.randn(dim, generator=g, dtype=torch.float64)
    w0 = means.mean(0) + start_distance * direction / direction.norm()
    ws = global_trajectory(alg, fed, rounds=rounds, seed=seed, w0=w0)["global"][:, 0]
    mu_f = lam / (1.0 + lam)
    eta_eff = lr * beta * local_rounds
    avg = averaged_iterates(ws[:-1], eta_eff, mu_f)  # w̄_T for T = 1..rounds uses w^0..w^{T-1}
    grads_opt = lam / (1 + lam) * (means.mean(0) - means)
    return {"T": np.arange(1, rounds + 1), "last_gap": quadratic_envelope_gap(ws[1:], means, lam).numpy(),
            "avg_gap": quadratic_envelope_gap(avg, means, lam).numpy(), "mu_F": mu_f,
            "eta_eff": eta_eff, "q": 1 - beta * (1 - (1 - lr * mu_f) ** local_rounds),
            "delta_sq": float(client_variances(fed).mean()) / (batch_size * (1 + lam) ** 2),
            "sigma_F1_sq": float((grads_opt ** 2).sum(1).mean()),
            "Delta0": float(start_distance ** 2), "lam": lam}


@single_threaded
def floor_vs_delta(*, batch_sizes=(1, 2, 4, 8, 16), seeds=(0, 1, 2), rounds: int = 300,
                   noise: float = 1.0, **kw) -> dict[str, Any]:
    """E.B7 floor: the stationary ``F(w̄_T) − F*`` (mean over the last half of the run) for
    mini-batch sizes ``|D|`` (δ² ∝ 1/|D|, ν = 0).  Theorem 1's floor λ²δ²/μ_F predicts
    slope 1 of log floor vs log δ².  Returns ``delta_sq [B]`` and ``floor [seeds, B]``."""
    floors, deltas = [], []
    for seed in seeds:
        row = []
        for b in batch_sizes:
            r = strongly_convex_run(batch_size=b, noise=noise, rounds=rounds, seed=seed,
                                    start_distance=0.0, **kw)
            row.append(float(np.mean(r["avg_gap"][rounds // 2:])))
            if seed == seeds[0]:
                deltas.append(r["delta_sq"])
        floors.append(row)
    return {"batch_size": np.array(batch_sizes), "delta_sq": np.array(deltas),
            "floor": np.array(floors), "lam": r["lam"], "mu_F": r["mu_F"]}


@single_threaded
def floor_vs_sampling(*, clients: int = 40, sampled=(5, 10, 20, 30), seeds=(0, 1),
                      rounds: int = 40, **kw) -> dict[str, Any]:
    """E.B7 client-sampling term: noise-free clients (δ = 0), S of N clients aggregated per
    round; the stationary ``F(w̄_T) − F*`` (mean over the last half) against ``N/S − 1``
    (Theorem 1's (N/S − 1)σ²_{F,1}/(μ_F T N) term scales like N/S − 1 at fixed T; it
    vanishes at S = N).  Returns ``ratio = N/S − 1 [K]`` and ``floor [seeds, K]``."""
    floors = [[float(np.mean(strongly_convex_run(
        clients=clients, clients_per_round=s, noise=0.0, rounds=rounds, seed=seed,
        start_distance=0.0, **kw)["avg_gap"][rounds // 2:])) for s in sampled] for seed in seeds]
    return {"S": np.array(sampled), "ratio": clients / np.array(sampled, dtype=float) - 1,
            "floor": np.array(floors)}


@single_threaded
def personalized_ball(*, lams=(5.0, 10.0, 20.0, 50.0, 100.0), seeds=(0,), rounds: int = 60,
                      noise: float = 1.0, batch_size: int = 5, clients: int = 10,
                      dim: int = 5, inner_steps: int = 3, model: str = "quadratic"
                      ) -> dict[str, Any]:
    """E.B9 (Theorems 1b/2b): mean ``(1/N) Σ ‖θ̃_i − w‖²`` after ``rounds`` rounds of pFedMe
    (R = 1, S = N, β = 1, η = 0.5/μ_F … K inexact inner steps with η_p = 0.5/(1+λ), i.e.
    ν > 0 and δ > 0) on QuadraticMean clients, vs λ; prediction ``σ²_{F,1}(λ)/λ² + δ²``
    with the exact ``σ²_{F,1} = (λ/(1+λ))² (1/N)Σ‖x̄_i − w*‖²``.  Returns ``gap [seeds, L]``
    and ``predicted [L]`` (diversity term only) and ``delta_sq [L]``.  ``model="cosine"``
    uses the non-convex :class:`CosineQuadratic` clients (Theorem 2(b); needs λ > 2√2·L ≈ 14
    for its Lemma 2(b); ``predicted``/``delta_sq`` are then the quadratic-part values, for
    reference only)."""
    if model not in ("quadratic", "cosine"):
        raise ValueError(f"model must be 'quadratic' or 'cosine', got {model!r}")
    gaps, pred, dsq = [], [], []
    for seed in seeds:
        fed = quadratic_federation(num_clients=clients, dim=dim, noise=noise, seed=seed)
        means = client_means(fed)
        spread = float(((means - means.mean(0)) ** 2).sum(1).mean())
        row = []
        for lam in lams:
            mu_f = lam / (1 + lam)
            alg = PFedMe(lam=lam, lr=0.5 / (lam * mu_f), personal_lr=0.5 / (1 + lam),
                         inner_steps=inner_steps, local_rounds=1, batch_size=batch_size,
                         beta=1.0, clients_per_round=clients)
            ws = global_trajectory(alg, fed, rounds=rounds, seed=seed, w0=means.mean(0),
                                   record=("global", "personalized"),
                                   model=CosineQuadratic(dim) if model == "cosine" else None)
            theta, w = ws["personalized"][-1], ws["global"][-2]  # θ̃ solved against w^{T-1}
            row.append(float(((theta - w) ** 2).sum(1).mean()))
            if seed == seeds[0]:
                pred.append((lam / (1 + lam)) ** 2 * spread / lam ** 2)
                dsq.append(float(client_variances(fed).mean()) / (batch_size * (1 + lam) ** 2))
        gaps.append(row)
    return {"lam": np.array(lams, dtype=float), "gap": np.array(gaps),
            "predicted": np.array(pred), "delta_sq": np.array(dsq)}


# ----------------------------------------------------------- non-convex (§E.B8)
class CosineQuadratic(QuadraticMean):
    """A smooth non-convex client loss with a cheap exact prox (E.B8):
    ``f̃(θ; x) = ½‖θ − x‖² + a Σ_k cos(ω θ_k)``, so ``f_i(θ) = ½‖θ − x̄_i‖² + v_i/2 +
    a Σ_k cos(ω θ_k)``; Hessian eigenvalues in ``[1 − aω², 1 + aω²]`` (non-convex when
    ``aω² > 1``; A1(b) with ``L = 1 + aω²``). Parameters ``{"theta": [N, dim]}``."""

    def __init__(self, dim: int, *, a: float = 1.0, omega: float = 2.0):
        super().__init__(dim)
        self.a = positive("a", a)
        self.omega = positive("omega", omega)

    @property
    def L(self) -> float:
        return 1.0 + self.a * self.omega ** 2

    def per_client_loss(self, params, x, y):
        th = params["theta"]
        return super().per_client_loss(params, x, y) + self.a * torch.cos(self.omega * th).sum(-1)

    def prox(self, means: torch.Tensor, w: torch.Tensor, *, lam: float, steps: int = 200):
        """``θ̂_i(w) = argmin f_i(θ) + λ/2‖θ − w‖²`` coordinate-wise by gradient descent with
        step ``1/(1 + λ + aω²)`` (contraction ``2aω²/(1 + λ + aω²)`` per step; the
        objective is strongly convex when ``λ > aω² − 1``). ``means`` = ``x̄_i`` [N, d]."""
        if lam <= self.a * self.omega ** 2 - 1:
            raise ValueError("prox not strongly convex: need lam > a*omega^2 - 1")
        step = 1.0 / (1.0 + lam + self.a * self.omega ** 2)
        th = w.expand_as(means).clone()
        for _ in range(steps):
            g = (th - means) - self.a * self.omega * torch.sin(self.omega * th) + lam * (th - w)
            th = th - step * g
        return th


@single_threaded
def nonconvex_run(*, rounds: int = 128, seed: int = 0, lam: float = 15.0, lr: float = 0.02,
                  personal_lr: float = 0.03, local_rounds: int = 2, inner_steps: int = 2,
                  batch_size: int = 5, beta: float = 1.0, clients: int = 20, dim: int = 5,
                  noise: float = 1.0, data_seed: int = 0) -> dict[str, Any]:
    """Theorem 2 experiment (E.B8): pFedMe (S = N, uniform) on :class:`CosineQuadratic`
    clients (a = 1, ω = 2: L = 5, λ = 15 > 2√2·L); ``‖∇F(w_t)‖²`` for every round with
    ``∇F(w) = (1/N)Σ λ(w − θ̂_i(w))`` (eq. 6) and an exact prox.  Returns ``t``,
    ``grad_sq`` and ``E‖∇F(w_{t*})‖² = (1/T)Σ_{t<T}‖∇F(w_t)‖²`` (t* uniform) at ``T`` =
    powers of two from 4 to ``rounds``."""
    fed = quadratic_federation(num_clients=clients, dim=dim, noise=noise, seed=data_seed)
    model = CosineQuadratic(dim)
    means = client_means(fed)
    alg = PFedMe(lam=lam, lr=lr, personal_lr=personal_lr, inner_steps=inner_steps,
                 local_rounds=local_rounds, batch_size=batch_size, beta=beta,
                 clients_per_round=clients)
    g = torch.Generator().manual_seed(seed + 7)
    state = start_state(alg, fed, 3.0 * torch.randn(dim, generator=g, dtype=torch.float64), seed)
    ws = [state.models["global"]["theta"][0]]
    for _ in range(positive_int("rounds", rounds) - 1):
        state = alg.round(state, fed, model)
        ws.append(state.models["global"]["theta"][0])
    w = torch.stack(ws)  # [T, d]
    theta = model.prox(means[None].expand(len(ws), -1, -1), w[:, None, :], lam=lam)
    grad_sq = ((lam * (w[:, None, :] - theta)).mean(1) ** 2).sum(-1).numpy()
    Ts = [T for T in (2 ** k for k in range(2, 20)) if T <= rounds]
    expected = np.array([grad_sq[:T].mean() for T in Ts])
    return {"t": np.arange(len(ws)), "grad_sq": grad_sq, "T": np.array(Ts),
            "expected_grad_sq": expected, "L": model.L, "lam": lam}


def nonconvex_rate_runs(ts, seeds, *, lr0: float, seed: int = 0) -> np.ndarray:
    """``[len(seeds), len(ts)]`` values of E‖∇F(w_{t*})‖² for the Theorem 2(a) rate (E.B8):
    one :func:`nonconvex_run` per horizon T with Corollary 2's horizon-tuned step
    η_T = ``lr0``·(T/T₀)^{−1/3} (T₀ = ``ts[0]``), stochastic inner solves (|D| = 1, noise 3),
    seeds ``seed + s``.  The experiment of the check ``pfedme.nonconvex_rate_T`` and of the
    figure ``pfedme_nonconvex_T`` (one fit for both)."""
    ts = list(ts)
    return np.array([[nonconvex_run(rounds=t, seed=seed + s, noise=3.0, batch_size=1,
                                    lr=lr0 * (t / ts[0]) ** (-1.0 / 3.0))["grad_sq"].mean()
                      for t in ts] for s in seeds])
