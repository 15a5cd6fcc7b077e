"""CGPFL and CGPFL-Heur — X. Tang, S. Guo, J. Guo, *Personalized Federated Learning with
Contextualized Generalization*, IJCAI 2022 (arXiv 2106.13044; ICLR-2022 submission
*… with Clustered Generalization*).  Algorithm 1; docs/formulas.md §A.3, §A.5, §A.9.

Round ``t`` (all clients batched; models stored row-major: Ω_K is ``[K, ...]``):

1. client ``i`` receives ``ω̃_{i,0} = ω^t_{k(i)}`` (``Ω_{I,0} = Ω_K J^t``, J^t the indicator);
2. for ``r = 0 … R−1``: fresh mini-batch; ``S`` personalized steps
   ``θ ← θ − η(∇f̃_i(θ) + λ(θ − ω̃_{i,r}))`` (:func:`algorithms.engine.steps.prox_steps`), then the
   local generalized-model step ``ω̃_{i,r+1} = ω̃_{i,r} − β·c·(ω̃_{i,r} − θ̃_i)``; the
   paper's ``c = 2/N`` (``∇_{ω_i} G``, ICLR appendix) is ``local_step="paper"``; the default
   ``local_step="pfedme"`` uses ``c = λ`` so that ``lr`` = β means pFedMe's η and the step
   does not vanish as N grows (docs/formulas.md §A.5 practical note: with c = 2/N, N = 40 and
   β = 0.005 the context models barely move); ``local_scale > 0`` sets ``c`` directly.
   Same algorithm, only β is parametrised differently: β_paper = lr·λ·N/2;
3. server: k-means++ (:func:`pfl_theory.kmeans.kmeans`, seeded, ``kmeans_restarts``
   restarts) on the uploads ``ω̃_{i,R}`` → labels of ``P^{t+1}``;
4. ``Ω^{t+1} = Ω^t − α(Ω^t − Ω_{I,R} P^{t+1})`` (per context: ``(1−α)ω_k + α·mean`` of
   its cluster's uploads), computed literally with the N×K matrix ``P^{t+1}``.

**K = 1 ↔ pFedMe.** With ``num_contexts=1`` and all clients aggregated, one round is
pFedMe's (docs/formulas.md §B.4) under ``β·c = η_pFedMe·λ`` (default ``local_step="pfedme"``:
``lr = η_pFedMe``; with the paper's ``c = 2/N``: ``lr = η_pFedMe·λ·N/2``), ``alpha = β_pFedMe``,
``personal_lr = η_p``, ``inner_steps = K_pFedMe``, pFedMe ``clients_per_round = N``,
``aggregation="uniform"``.  The same seed then gives the same mini-batches (stream 0 of
the round generator is drawn in the same order), hence the same trajectory.

Choices the paper leaves open (recorded):

* ``Ω^0``: K copies of the model initialised from ``seed`` (pFedMe's ``w^0``);
  ``P^0``: round-robin ``k(i) = i mod K`` (irrelevant while the ``ω^0_k`` coincide).
* ``θ_i`` starts each round at ``ω̃_{i,0}`` and is warm-started across the R local rounds
  (as the engine's pFedMe; needed for the exact K = 1 reduction).
* k-means seed: the run seed, the same every round (the paper's Lemma 2 argument: with a
  fixed k-means++ seeding, ``Q^t = I`` after a few rounds).
* Context identity: new centres are matched to ``Ω^t`` by the Hungarian algorithm on
  squared distances (:func:`pfl_theory.kmeans.align_result`), so context ``k`` keeps its
  index and ``Q^t = I`` when the clustering is unchanged.
* Empty cluster (k-means returns one only when the uploads have < K distinct points): its
  column of ``P^{t+1}`` is zero and its model is kept, ``ω^{t+1}_k = ω^t_k``.
* ``∇G_k`` ([DERIVED] from §A.2, ``G = (1/K) Σ_k G_k``): ``G_k(ω_k) = (K/N) Σ_{i∈C_k}
  ‖θ̃_i − ω_k‖²`` at the personalized solutions ``θ̃_i(ω^t_{k(i)})`` of local round r = 0,
  so ``∇G_k = (2K/N) Σ_{i∈C_k}(ω_k − θ̃_i)``; K = 1 gives ``(2/λ)∇F`` of pFedMe.

Recorded in ``state.tensors`` after round t: ``assignment`` (labels of P^{t+1}),
``transition`` ``Q^t = J^t P^{t+1}`` (``Q[k,k'] = |C^t_k ∩ C^{t+1}_{k'}| / |C^{t+1}_{k'}|``),
``q_distance`` ``‖Q^t − I‖_F``, ``grad_G_sq_over_K`` ``‖∇G_K(Ω^t)‖²/K``,
``personal_gap_sq`` ``(1/N)Σ‖θ̃_i(ω^t_{k(i)}) − ω^t_{k(i)}‖²`` (Thm 4.1(b)), ``kmeans_cost``
``(1/N)Σ‖ω̃_{i,R} − centre‖²``, ``num_contexts``.  Evaluated: ``personalized`` (θ̃_i after
the round) and ``context`` (``ω^{t+1}_{k(i)}`` per client).

CGPFL-Heur (``cgpfl-heur``, §A.9): until round ``select_round`` one context (pFedMe);
in that round the server computes ``e(K)`` for ``K = 1 … k_max`` (default ``N/2``) with
:func:`pfl_theory.cgpfl.select_k` on the uploads (``select_on="personalized"``: on θ̃_i,
the Θ* of the printed cost), freezes ``K̂`` and uses its clustering as ``P^{t+1}``; the
context models entering step 4 are ``Ω^t J^t P^{t+1}`` (each new context starts from the
mean of its members' old context models).  Afterwards it is CGPFL with ``K̂``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, broadcast, flatten, hp, register, select,
                             validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, everyone
from algorithms.engine.steps import prox_steps
from pfl_theory.kmeans import align_result, kmeans
from pfl_theory.validation import in_range, nonnegative, positive, positive_int


def assignment_matrix(labels: torch.Tensor, k: int, dtype: torch.dtype) -> torch.Tensor:
    """P ∈ R^{N×K}: ``1/|C_j|`` if ``labels[i] = j`` (eq. 3); empty clusters give a zero column."""
    counts = torch.bincount(labels, minlength=k).to(dtype)
    p = torch.zeros(labels.numel(), k, dtype=dtype, device=labels.device)
    p[torch.arange(labels.numel(), device=labels.device), labels] = 1.0 / counts[labels]
    return p


def transition(labels_old: torch.Tensor, labels_new: torch.Tensor, k_old: int, k_new: int,
               dtype: torch.dtype) -> torch.Tensor:
    """``Q^t = J^t P^{t+1}`` (§A.3 [DERIVED]); ``[k_old, k_new]``."""
    j = torch.zeros(k_old, labels_old.numel(), dtype=dtype, device=labels_old.device)
    j[labels_old, torch.arange(labels_old.numel(), device=labels_old.device)] = 1.0
    return j @ assignment_matrix(labels_new, k_new, dtype)


def project(params: dict, p: torch.Tensor) -> dict:
    """``Ω_{I} P`` row-major: ``Pᵀ @ rows`` → ``[K, ...]`` (per-cluster means)."""
    return {k: torch.tensordot(p.T, v, dims=1) for k, v in params.items()}


@dataclass(frozen=True)
class _CGPFLBase(Algorithm):
    """Shared fields.  Paper symbols (CGPFL, Algorithm 1): λ = ``lam``, η = ``personal_lr``
    (the personalized step), S = ``inner_steps``, β = ``lr`` (the local generalized-model
    step; note: ``lr`` is β here, not η), c = ``local_scale``/``local_step``, α = ``alpha``,
    R = ``local_rounds``, |D| = ``batch_size``."""

    client_models = ("personalized", "local")
    lazy_batches = True     # every client trains: gather one local round at a time (LazyRows)
    server_rows = {"assignment": 0}
    lam: float = hp(12.0, "regularisation λ pulling θ_i to its context model (CGPFL default 12)",
                    check=positive, symbol="λ")
    personal_lr: float = hp(0.01, "learning rate η of the S personalized steps", check=positive,
                            symbol="η")
    inner_steps: int = hp(5, "personalized steps S per local round", check=positive_int, symbol="S")
    lr: float = hp(0.005, "CGPFL's β (not η): step of the local generalized-model update "
                          "(default: the paper's 0.005; with local_step='pfedme' the step "
                          "β·λ = 0.06 is stable on the default data, β = 1 gives β·λ = 12 and "
                          "diverges)", check=positive, symbol="β")
    local_step: str = hp("pfedme", "scale c of the local step ω̃ ← ω̃ − β·c·(ω̃ − θ̃): "
                                   "'pfedme' c = λ (β = pFedMe's η), 'paper' c = 2/N (∇_ω G)",
                                   symbol="c")
    local_scale: float = hp(0.0, "explicit c of the local step (> 0 overrides local_step)",
                            check=nonnegative, symbol="c")
    alpha: float = hp(1.0, "server step α in Ω ← Ω − α(Ω − Ω_{I,R}P) (α = 1: cluster means)",
                      symbol="α")
    local_rounds: int = hp(10, "local rounds R per communication round", check=positive_int,
                           symbol="R")
    batch_size: int = batch_size_hp()
    kmeans_restarts: int = hp(10, "k-means++ restarts of the server clustering",
                              check=positive_int, symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        if self.local_step not in ("pfedme", "paper"):
            raise ValueError(f"local_step must be 'pfedme' or 'paper', got {self.local_step!r}")
        in_range("alpha", self.alpha, 0.0, 1.0)

    # -- pieces ---------------------------------------------------------------------------
    def step_scale(self, n: int) -> float:
        """``c``: ``local_scale`` if > 0, else ``λ`` ('pfedme') or ``2/N`` ('paper')."""
        if self.local_scale > 0:
            return self.local_scale
        return self.lam if self.local_step == "pfedme" else 2.0 / n

    def local_step_size(self, n: int) -> float:
        """``β·c`` of the local generalized-model step."""
        return self.lr * self.step_scale(n)

    def local_update(self, model, omega_i0, x, y, n: int | None = None):
        """Step 2 for the clients in ``x[R, P, B, ...]`` of a federation of ``n`` clients
        (default ``P``; ``c = 2/N`` needs N). Returns ``(θ̃ after r=0, θ̃, ω̃_{·,R})``."""
        step = self.local_step_size(x.shape[1] if n is None else n)
        w, theta, first = omega_i0, dict(omega_i0), None
        for r in range(x.shape[0]):
            theta = prox_steps(model, theta, w, x[r], y[r], lam=self.lam,
                               lr=self.personal_lr, steps=self.inner_steps)
            first = theta if first is None else first
            w = {k: w[k] - step * (w[k] - theta[k]) for k in w}
        return first, theta, w

    def _kmeans(self, uploads: dict, k: int, seed: int):
        return kmeans(flatten(uploads), k, restarts=self.kmeans_restarts, seed=seed % 2**32)

    def cluster(self, state: State, fed, uploads: dict, theta: dict, rows: torch.Tensor):
        """Server clustering of the uploads of clients ``rows`` (all N unless a client was
        left out) → ``(their labels, Ω entering step 4 [K_new], extra tensors)``."""
        raise NotImplementedError

    # -- contract ---------------------------------------------------------------------------
    def initial_contexts(self) -> int:
        raise NotImplementedError

    def init(self, fed, model, seed: int) -> State:
        n, k = fed.num_clients, self.initial_contexts()
        if k > n:
            raise ValueError(f"num_contexts K={k} > number of clients N={n}")
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        labels = torch.arange(n, device=fed.device) % k
        return State(0, seed, {"context": broadcast(w, k), "personalized": broadcast(w, n),
                               "local": broadcast(w, n)},
                     {"assignment": labels,
                      "num_contexts": torch.tensor(k, device=fed.device)})

    def first_phase(self, state: State, fed, model) -> Phase:
        """Every client trains from its context model ``ω^t_{k(i)}`` (sent as payload)."""
        batches = fed.sample_batches(self.local_rounds, self.batch_size, state.generator())
        clients = everyone(fed)
        labels = state.tensors["assignment"][clients.to(fed.device)]
        return Phase("train", clients, {"sgd": batches},
                     {"omega_i0": select(state.models["context"], labels)}, send=())

    def client_update(self, phase, model, view):
        """Step 2; uploads ``ω̃_{i,R}``, θ̃_i after r = 0 (for ∇G and the gap) and θ̃_i when
        the server clusters on it."""
        x, y = view.batches["sgd"]
        first, theta, w = self.local_update(model, view.payload["omega_i0"], x, y,
                                            view.num_clients)
        upload = {"local": w, "first": first}
        if getattr(self, "select_on", "uploads") == "personalized":
            upload["personalized"] = theta
        return {"personalized": theta, "local": w}, upload

    def server_aggregate(self, phase, state, uploads, fed, model):
        """Steps 3–4 on the uploads: clustering, ``Ω^{t+1}``, the recorded quantities."""
        n, dt = fed.num_clients, fed.dtype
        rows = phase.upload_clients().to(fed.device)          # all N unless one was left out
        omega, every = state.models["context"], state.tensors["assignment"]
        labels = every[rows]
        k_old = next(iter(omega.values())).shape[0]
        omega_i0 = select(omega, labels)
        first, local = uploads["first"], uploads["local"]
        theta = uploads.get("personalized", local)
        new_labels, omega_prev, extra = self.cluster(state, fed, local, theta, rows)
        k_new = next(iter(omega_prev.values())).shape[0]
        p = assignment_matrix(new_labels, k_new, dt)
        means = project(local, p)
        empty = (torch.bincount(new_labels, minlength=k_new) == 0)
        omega_next = {k: torch.where(empty.view(-1, *[1] * (v.ndim - 1)), v,
                                     (1 - self.alpha) * v + self.alpha * means[k])
                      for k, v in omega_prev.items()}

        q = transition(labels, new_labels, k_old, k_new, dt)
        eye = torch.eye(k_old, k_new, dtype=dt, device=q.device)
        gap = flatten(omega_i0) - flatten(first)                       # ω_{k(i)} − θ̃_i
        grad = (2.0 * k_old / n) * torch.zeros(k_old, gap.shape[1], dtype=dt,
                                                device=gap.device).index_add_(0, labels, gap)
        resid = flatten(local) - flatten(means)[new_labels]
        if rows.numel() < n:      # clients left out keep their context (modulo a new K)
            new_labels = (every % k_new).index_copy(0, rows, new_labels)
        tensors = {"assignment": new_labels, "transition": q,
                   "q_distance": torch.linalg.norm(q - eye),
                   "grad_G_sq_over_K": (grad ** 2).sum() / k_old,
                   "personal_gap_sq": (gap ** 2).sum(1).mean(),
                   "kmeans_cost": (resid ** 2).sum(1).mean(),
                   "num_contexts": torch.tensor(k_new, device=fed.device), **extra}
        return state.replace(models={**state.models, "context": omega_next},
                             tensors=tensors), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"],
                "context": select(state.models["context"], state.tensors["assignment"])}

    def diagnostics(self, state: State, fed, model) -> dict:
        keys = ("q_distance", "grad_G_sq_over_K", "personal_gap_sq", "kmeans_cost",
                "num_contexts", "k_hat", "mu")
        out = {k: float(state.tensors[k]) for k in keys if k in state.tensors}
        if "mu_bands" in state.tensors and "k_hat" in state.tensors:   # K̂'s band of μ
            for k, lo, hi in mu_band_rows(state.tensors["mu_bands"]):
                if k == int(state.tensors["k_hat"]):
                    out.update(mu_band_lo=lo, mu_band_hi=hi)
        return out


@register("cgpfl")
@dataclass(frozen=True)
class CGPFL(_CGPFLBase):
    """CGPFL (Tang, Guo, Guo, IJCAI 2022, arXiv 2106.13044), Algorithm 1.  Symbols: K =
    ``num_contexts``, λ = ``lam``, η = ``personal_lr``, S = ``inner_steps``, β = ``lr`` (not
    η), c = ``local_step``/``local_scale``, α = ``alpha``, R = ``local_rounds``."""
    num_contexts: int = hp(4, "number K of context (generalized) models", check=positive_int,
                           symbol="K")

    def __post_init__(self):
        super().__post_init__()

    def initial_contexts(self) -> int:
        return self.num_contexts

    def cluster(self, state, fed, uploads, theta, rows):
        omega = state.models["context"]
        res = align_result(self._kmeans(uploads, self.num_contexts, state.seed), flatten(omega))
        return res.labels.to(fed.device), omega, {}


def mu_band_rows(bands: torch.Tensor) -> list[tuple[int, float, float]]:
    """``(K, lo, hi)`` per band of μ from CGPFL-Heur's ``mu_bands`` state tensor (rows K, lo)."""
    rows = bands.tolist()
    his = [lo for _, lo in rows[1:]] + [float("inf")]
    return [(int(k), lo, hi) for (k, lo), hi in zip(rows, his)]


@register("cgpfl-heur")
@dataclass(frozen=True)
class CGPFLHeur(_CGPFLBase):
    """CGPFL-Heur (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.9): K̂ = argmin e(K) over
    K = 1 … K_max = ``k_max``, μ = ``mu``, chosen in round ``select_round``; then CGPFL with
    λ = ``lam``, η = ``personal_lr``, S = ``inner_steps``, β = ``lr`` (not η), α = ``alpha``."""
    k_max: int = hp(0, "largest K searched by e(K) (0: N/2, the paper's bound)", symbol="K_max")
    mu: float = hp(0.0, "weight μ of cost(Θ,Ω;K) in e(K), in the models' units (stands in "
                        "for λ + L/2); 0 (default): μ chosen by mu_rule",
                   check=nonnegative, symbol="μ")
    mu_rule: str = hp("widest-band", "how μ is chosen when mu = 0 (pfl_theory.cgpfl.select_k): "
                                     "'widest-band' (centre of the widest bounded band of μ "
                                     "giving one K̂: the sharpest elbow of cost(K); reads the "
                                     "uploads only) or 'relative' (μ = 1/cost(1); caps K̂ "
                                     "whatever the data)", symbol="—")
    select_round: int = hp(0, "round in which K̂ = argmin e(K) is chosen and frozen", symbol="—")
    select_on: str = hp("uploads", "models clustered by e(K): 'uploads' (ω̃_{i,R}) or "
                                   "'personalized' (θ̃_i)", symbol="—")

    def __post_init__(self):
        super().__post_init__()
        positive_int("k_max", self.k_max, minimum=0)
        positive_int("select_round", self.select_round, minimum=0)
        if self.select_on not in ("uploads", "personalized"):
            raise ValueError(f"select_on must be 'uploads' or 'personalized', got {self.select_on!r}")
        if self.mu_rule not in ("widest-band", "relative"):
            raise ValueError(f"mu_rule must be 'widest-band' or 'relative', got {self.mu_rule!r}")

    def initial_contexts(self) -> int:
        return 1

    def cluster(self, state, fed, uploads, theta, rows):
        from pfl_theory.cgpfl import select_k

        omega, n = state.models["context"], rows.numel()
        k = next(iter(omega.values())).shape[0]
        if state.round != self.select_round:
            res = align_result(self._kmeans(uploads, k, state.seed), flatten(omega))
            return res.labels.to(fed.device), omega, {}
        models = flatten(uploads if self.select_on == "uploads" else theta)
        k_max = min(self.k_max or max(1, n // 2), n)
        sel = select_k(models.detach().cpu().double().numpy(), mu=self.mu or self.mu_rule,
                       m=fed.train.counts[rows].cpu().double().numpy(), k_max=k_max,
                       restarts=self.kmeans_restarts, seed=state.seed % 2**31)
        labels = torch.as_tensor(sel.clusterings[sel.k_hat - 1].labels, device=fed.device).long()
        p = assignment_matrix(labels, sel.k_hat, fed.dtype)
        omega_prev = project(select(omega, state.tensors["assignment"][rows]), p)  # Ω^t J^t P^{t+1}
        e = torch.as_tensor(sel.e_values, dtype=fed.dtype, device=fed.device)
        # each band's K and lower edge in the models' units (w / cost(1)); its upper edge is
        # the next band's lower edge, the last band's is +inf (kept finite in the state)
        s2 = sel.scale ** 2 or 1.0
        bands = torch.tensor([[b.k, b.lo / s2] for b in sel.bands], dtype=torch.float64,
                             device=fed.device)
        return labels, omega_prev, {"k_hat": torch.tensor(sel.k_hat, device=fed.device),
                                    "e_values": e, "mu": torch.tensor(sel.mu, dtype=torch.float64,
                                                                   device=fed.device),
                                    "mu_bands": bands}

    def server_aggregate(self, phase, state, uploads, fed, model):
        new, _ = super().server_aggregate(phase, state, uploads, fed, model)
        if "k_hat" not in new.tensors and "k_hat" in state.tensors:  # keep the frozen record
            new = new.replace(tensors={**new.tensors, **{k: state.tensors[k] for k in (
                "k_hat", "e_values", "mu", "mu_bands") if k in state.tensors}})
        return new, None
