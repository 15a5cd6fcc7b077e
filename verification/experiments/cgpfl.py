"""CGPFL experiments shared by the verification checks and the paper figures.

Paper: Tang, Guo, Guo, *Personalized Federated Learning with Contextualized Generalization*
(IJCAI 2022, arXiv 2106.13044); docs/formulas.md §A.5 (Algorithm 1), §A.7 (Theorem 4.1),
§A.9 (e(K)), §E.A items 6, 8, 12.

Planted data: label-skew contexts (:func:`synthetic.contexts.label_skew_contexts`, the
CGPFL experimental design — a context = a shared subset of 3 of 10 classes) drawn from a
Gaussian class pool ``x = s·m_c + N(0, I)``, ``m_c ~ N(0, I_dim)``.  (The softmax generator
:func:`synthetic.contexts.classification_contexts` was tried first: its per-client feature
means dominate the labels, so the planted contexts are not visible in the client models.)

Hyper-parameters (:data:`CGPFL_HP`): λ = 12 (CGPFL default), η = 0.05, S = 5, R = 5,
|D| = 20, α = 1, and the local generalized-model step with ``local_scale = λ``, ``β = 0.02``
(β·c = 0.24 per local round; the paper's c = 2/N would make the step depend on N, which the
N-sweep must avoid).  μ = 200 for e(K) on the uploads (the paper's μ ≈ λ + L/2 gives K̂ = 1
here because upload costs are small; :func:`khat_trials` reports the whole μ band).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from algorithms.engine.base import flatten, get_algorithm
from algorithms.engine.evaluation import evaluate
from algorithms.engine.models import build_model
from synthetic.contexts import label_skew_contexts
from synthetic.federation import Federation

CGPFL_HP = dict(lam=12.0, personal_lr=0.05, inner_steps=5, lr=0.02, local_scale=12.0,
                alpha=1.0, local_rounds=5, batch_size=20)
MU = 200.0
BASELINE_HP = {"fedavg": dict(lr=0.05, local_rounds=5),
               "pfedme": dict(lam=12.0, lr=0.02, personal_lr=0.05, local_rounds=5, inner_steps=5),
               "ifca": dict(lr=0.05, local_rounds=5, num_contexts=4)}


@dataclass(frozen=True)
class Planted:
    fed: Federation
    assignment: np.ndarray
    k0: int


def planted_federation(num_clients: int = 20, k0: int = 4, *, num_classes: int = 10,
                       classes_per_context: int = 3, dim: int = 20, class_sep: float = 0.5,
                       size_range: tuple[int, int] = (40, 80), seed: int = 0,
                       dtype: torch.dtype = torch.float64, device=None) -> Planted:
    """Label-skew federation with ``k0`` planted contexts over a Gaussian class pool."""
    rng = np.random.default_rng(seed)
    means = class_sep * rng.normal(size=(num_classes, dim))
    per = num_clients * (size_range[1] // classes_per_context + 1)  # never runs out
    y = np.repeat(np.arange(num_classes), per)
    x = means[y] + rng.normal(size=(y.size, dim))
    cd = label_skew_contexts(x, y, num_clients, k0, classes_per_context=classes_per_context,
                             size_range=size_range, seed=seed)
    fed = Federation.from_client_arrays(cd.xs, cd.ys, num_classes=num_classes, seed=seed,
                                        dtype=dtype, device=device)
    return Planted(fed, np.asarray(cd.assignment), k0)


def accuracy(alg, state, fed, model, name: str) -> float:
    """Sample-weighted test accuracy of the evaluated model ``name``."""
    acc, _ = evaluate(model, alg.evaluated(state)[name], fed.test)
    c = fed.test.counts.double()
    return float((acc * c).sum() / c.sum())


def run_recorded(alg, fed, model, rounds: int, seed: int, *, keys=("grad_G_sq_over_K",),
                 eval_name: str | None = None, eval_every: int = 0):
    """Run ``rounds`` rounds; return ``(state, {key: [per-round floats]}, [(t, acc)])``."""
    state = alg.init(fed, model, seed)
    rec = {k: [] for k in keys}
    accs = []
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        for k in keys:
            rec[k].append(float(state.tensors[k]))
        if eval_name and eval_every and (state.round % eval_every == 0 or state.round == rounds):
            accs.append((state.round, accuracy(alg, state, fed, model, eval_name)))
    return state, rec, accs


def cgpfl(k: int, **over):
    return get_algorithm("cgpfl")(num_contexts=k, **{**CGPFL_HP, **over})


# ---------------------------------------------------------------- K̂ versus K₀ (§E.A 12)
def khat_trials(seeds, k0s, *, num_clients: int = 24, mus=(MU,), mu: float = MU,
                class_sep: float = 0.5) -> list[dict]:
    """CGPFL-Heur (selection in round 0, on the uploads) on planted data, one trial per
    (seed, K₀).  Records K̂ of the algorithm at ``mu`` and, from the same e(K) ingredients
    (complexity terms and costs of :func:`pfl_theory.cgpfl.select_k`), K̂ for every μ in ``mus``."""
    from pfl_theory.cgpfl import select_k

    rows = []
    for s in seeds:
        for k0 in k0s:
            pl = planted_federation(num_clients, k0, seed=1000 * k0 + s, class_sep=class_sep)
            model = build_model("mlr", pl.fed)
            alg = get_algorithm("cgpfl-heur")(mu=mu, **CGPFL_HP)
            st = alg.round(alg.init(pl.fed, model, s), pl.fed, model)
            sel = select_k(flatten(st.models["local"]).cpu().numpy(), mu=mu,
                           m=pl.fed.train.counts.double().cpu().numpy(), k_max=num_clients // 2,
                           restarts=alg.kmeans_restarts, seed=s % 2**31)
            sweep = [int(sel.ks[np.argmin(sel.complexity_terms + m_ * sel.costs)]) for m_ in mus]
            rows.append({"seed": s, "k0": k0, "k_hat": int(st.tensors["k_hat"]),
                         "k_hat_recomputed": sel.k_hat, "sweep": sweep})
    return rows


# ---------------------------------------------------------- accuracy versus K (Fig. 3)
def accuracy_vs_k(seed: int = 0, *, num_clients: int = 20, k0: int = 4, rounds: int = 30,
                  ks=None, mu: float = MU) -> dict:
    """Personalized/context accuracy of CGPFL for K = 1 … N/2 after ``rounds`` rounds,
    e(K) from the round-0 uploads (CGPFL-Heur's computation) and K̂."""
    pl = planted_federation(num_clients, k0, seed=seed)
    model = build_model("mlr", pl.fed)
    ks = list(range(1, num_clients // 2 + 1)) if ks is None else list(ks)
    heur = get_algorithm("cgpfl-heur")(mu=mu, k_max=max(ks), **CGPFL_HP)
    st = heur.round(heur.init(pl.fed, model, seed), pl.fed, model)
    rows = []
    for k in ks:
        alg = cgpfl(k)
        state, _, _ = run_recorded(alg, pl.fed, model, rounds, seed, keys=())
        rows.append({"K": k, "personalized": accuracy(alg, state, pl.fed, model, "personalized"),
                     "context": accuracy(alg, state, pl.fed, model, "context"),
                     "e": float(st.tensors["e_values"][k - 1])})
    return {"rows": rows, "k_hat": int(st.tensors["k_hat"]), "k0": k0}


# ------------------------------------------------------ accuracy versus round (Fig. 1/2)
def accuracy_vs_round(seed: int = 0, *, num_clients: int = 20, k0: int = 4, rounds: int = 40,
                      ks=(1, 2, 4, 8), eval_every: int = 5) -> dict[str, list]:
    """Test accuracy every ``eval_every`` rounds: CGPFL (personalized) for each K, IFCA
    (cluster), pFedMe (personalized), FedAvg (global); all clients every round."""
    pl = planted_federation(num_clients, k0, seed=seed)
    model = build_model("mlr", pl.fed)
    runs = {f"CGPFL K={k}": (cgpfl(k), "personalized") for k in ks}
    n = num_clients
    runs["IFCA K=4"] = (get_algorithm("ifca")(clients_per_round=n, **BASELINE_HP["ifca"]), "cluster")
    runs["pFedMe"] = (get_algorithm("pfedme")(clients_per_round=n, **BASELINE_HP["pfedme"]),
                      "personalized")
    runs["FedAvg"] = (get_algorithm("fedavg")(clients_per_round=n, **BASELINE_HP["fedavg"]), "global")
    out = {}
    for name, (alg, ev) in runs.items():
        _, _, accs = run_recorded(alg, pl.fed, model, rounds, seed, keys=(), eval_name=ev,
                                  eval_every=eval_every)
        out[name] = accs
    return out


# --------------------------------------------------------- convergence rate (§E.A 8)
def avg_grad(k: int, rounds: int, seed: int, *, num_clients: int = 20, k0: int = 4,
             local_rounds: int = 5, lr_scale: float = 1.0) -> np.ndarray:
    """Running averages ``(1/T) Σ_{t<T} ‖∇G_K(Ω^t)‖²/K`` for T = 1 … ``rounds``."""
    pl = planted_federation(num_clients, k0, seed=seed)
    model = build_model("mlr", pl.fed)
    alg = cgpfl(k, local_rounds=local_rounds, lr=CGPFL_HP["lr"] * lr_scale)
    _, rec, _ = run_recorded(alg, pl.fed, model, rounds, seed)
    g = np.asarray(rec["grad_G_sq_over_K"])
    return np.cumsum(g) / np.arange(1, g.size + 1)


def convergence_in_t(seeds, ts, *, k: int = 4, schedule: bool = False) -> np.ndarray:
    """``y[seed, j]`` = (1/T_j) Σ_{t<T_j} ‖∇G_K‖²/K.  ``schedule=False``: one run of max(T)
    rounds with constant steps; ``True``: a run per T with the theorem's step choice
    α̂ ∝ T^{-1/4} (β scaled by (T/T_0)^{-1/4}, T_0 = min T)."""
    ts = list(ts)
    y = np.zeros((len(seeds), len(ts)))
    for i, s in enumerate(seeds):
        if not schedule:
            y[i] = avg_grad(k, max(ts), s)[np.asarray(ts) - 1]
        else:
            y[i] = [avg_grad(k, t, s, lr_scale=(t / ts[0]) ** -0.25)[-1] for t in ts]
    return y


def convergence_in_factors(seeds, *, rounds: int = 20, ks=(1, 2, 4, 8), ns=(10, 20, 40, 80),
                           rs=(1, 2, 4, 8), base=(4, 20, 5)) -> dict[str, tuple[list, np.ndarray]]:
    """One-factor sweeps at fixed T = ``rounds``: the average ‖∇G_K‖²/K against K (N, R at
    ``base``), N and R.  Returns ``{factor: (K·N·R values, y[seed, j])}`` plus the raw factor
    values under ``factor + '_values'``."""
    k0, n0, r0 = base
    out = {}
    for name, values in (("K", ks), ("N", ns), ("R", rs)):
        y = np.zeros((len(seeds), len(values)))
        knr = []
        for j, v in enumerate(values):
            k, n, r = (v, n0, r0) if name == "K" else (k0, v, r0) if name == "N" else (k0, n0, v)
            knr.append(k * n * r)
            for i, s in enumerate(seeds):
                y[i, j] = avg_grad(k, rounds, s, num_clients=n, local_rounds=r)[-1]
        out[name] = (knr, y)
        out[name + "_values"] = list(values)
    return out


# --------------------------------------------------------- Q^t → I (Lemma 2, §E.A 6)
def q_distances(seed: int, *, rounds: int = 15, k: int = 4) -> list[float]:
    """‖Q^t − I‖_F for t = 0 … rounds−1 on planted data."""
    pl = planted_federation(20, 4, seed=seed)
    model = build_model("mlr", pl.fed)
    _, rec, _ = run_recorded(cgpfl(k), pl.fed, model, rounds, seed, keys=("q_distance",))
    return rec["q_distance"]


__all__ = ["CGPFL_HP", "MU", "Planted", "planted_federation", "accuracy", "run_recorded",
           "cgpfl", "khat_trials", "accuracy_vs_k", "accuracy_vs_round", "avg_grad",
           "convergence_in_t", "convergence_in_factors", "q_distances",
           "reference_local_round", "global_update_rhs"]


# ------------------------------------------- reference loop (global-update identity, §E.A 7)
def reference_local_round(alg, state, fed, model) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 1 steps 1–2 written as a plain per-client, per-step loop (no batching, no
    shared helpers) on the round's mini-batches: returns the uploads ``Ω_{I,R}`` and
    ``H^t_I = (1/R) Σ_r c(ω̃_{i,r} − θ̃_i(ω̃_{i,r}))`` as ``[N, d]`` rows (eq. 5)."""
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, state.generator())
    x, y = fed.train.gather(batches)
    n = fed.num_clients
    c = alg.step_scale(n)
    labels = state.tensors["assignment"].tolist()
    ups, hs = [], []
    for i in range(n):
        w = {k: v[labels[i]][None].clone() for k, v in state.models["context"].items()}
        th = dict(w)
        h_sum = torch.zeros_like(flatten(w)[0])
        for r in range(alg.local_rounds):
            for _ in range(alg.inner_steps):
                g, _ = model.grad(th, x[r, i:i + 1], y[r, i:i + 1])
                th = {k: th[k] - alg.personal_lr * (g[k] + alg.lam * (th[k] - w[k])) for k in th}
            h = {k: c * (w[k] - th[k]) for k in w}
            h_sum = h_sum + flatten(h)[0]
            w = {k: w[k] - alg.lr * h[k] for k in w}
        ups.append(flatten(w)[0])
        hs.append(h_sum / alg.local_rounds)
    return torch.stack(ups), torch.stack(hs)


def global_update_rhs(alg, state, new_state, h: torch.Tensor) -> torch.Tensor:
    """ICLR eq. (6), row-major: ``Ω^{t+1} = [(1−α)I + αQ]ᵀ Ω^t − αβR (P^t Q^t)ᵀ H`` with
    P, Q from :mod:`pfl_theory.cgpfl_matrices` (the paper's matrices, numpy)."""
    from pfl_theory.cgpfl_matrices import assignment_matrix, transition_matrix

    old = state.tensors["assignment"].cpu().numpy()
    new = new_state.tensors["assignment"].cpu().numpy()
    k = next(iter(state.models["context"].values())).shape[0]
    p_t = assignment_matrix(old, k)
    q = transition_matrix(old, new, k)
    omega = flatten(state.models["context"]).cpu().double().numpy()
    a, b, r = alg.alpha, alg.lr, alg.local_rounds
    rhs = ((1 - a) * np.eye(k) + a * q).T @ omega - a * b * r * (p_t @ q).T @ h.cpu().double().numpy()
    return torch.as_tensor(rhs)
