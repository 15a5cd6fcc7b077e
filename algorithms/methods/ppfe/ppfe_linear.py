"""PPFE for linear models — the paper's synthetic experiment, with Local and FedAvg ridge.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 6.1 / Fig. 3; docs/formulas.md §C.6.
The paper states: 4 stages with decreasing complexity, full participation, exact local
optimisation, ridge regression at every stage with λ chosen per stage by grid search on a
held-out part of each client's training data and "progressively reduced across stages";
baselines Local ridge and FedAvg (parameter averaging) with the same tuning.  Everything
else is a reading of this toolkit (RECONSTRUCTED), named here:

1. **Stage 0 (federated)**: one global ridge model for all clients.  ``federated_solver=
   "pooled"`` (default): the exact minimiser of (1/M) Σ_i ‖X_i w − y_i‖² + λ‖w‖² over the
   pooled data (M = Σ n_i; equal n_i ⇒ the 1/N-weighted objective of eq. 5), i.e. FedAvg
   run to its optimum / clients sending sufficient statistics XᵀX, Xᵀy.  ``"one_shot_average"``:
   the literal "exact local optimisation + parameter averaging", w = (1/N) Σ_i ridge_i.
2. **Stages t ≥ 1 (personal)**: boosting on residuals — client i fits r_i = y_i − X_i Σ_{s<t} w_{s,i}
   with its own ridge; the ensemble is the plain sum Σ_t w_{t,i} (eq. 8 with α^{(t)}_i = 1;
   for squared loss the reweighting of eq. 7 is replaced by fitting residuals, as in
   L2-boosting).  The "complexity parameter" of a stage is its ridge λ.
3. **λ convention**: per-sample penalty — a fit on m samples minimises
   (1/m)‖Xw − y‖² + λ‖w‖², i.e. ``ridge(X, y, m·λ)``, so λ is comparable across stages.
4. **Tuning**: ``val_fraction`` (default 0.2) of every client's training data is held out
   (seeded split).  Stage t picks λ from the grid minimising the validation MSE of the
   partial ensemble Σ_{s≤t}; ``lambda_selection="shared"`` (default: one λ per stage, mean
   validation MSE over clients) or ``"per_client"``.  ``decrease``: ``"nonincreasing"``
   (default: λ_t ≤ λ_{t−1} for personal stages t ≥ 2), ``"strict"`` (λ_t < λ_{t−1}; a stage
   with no admissible λ is skipped, λ = inf) or ``"none"``.  Stage 0 is exempt (its λ acts on
   the pooled sample).  With ``refit=True`` (default) every stage is refitted on the full
   training data with the chosen λ after selection.
5. **Baselines**: Local ridge (one personal stage from zero) and FedAvg ridge (stage 0 alone
   — PPFE truncated to one stage, same solver and tuning).

Defaults are toolkit defaults (λ grid {1e-3, …, 1e2}, 4 stages) — UNRECOVERED in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import itertools

import numpy as np

from pfl_theory.validation import finite_array, in_range, positive_int
from synthetic.linear import LinearFederation, population_mse, ridge, test_mse

__all__ = ["DEFAULT_LAMBDA_GRID", "LinearFit", "fit_ppfe_linear", "fit_ppfe_linear_path",
           "fit_local_ridge", "fit_fedavg_ridge", "compare_methods"]

DEFAULT_LAMBDA_GRID = tuple(10.0 ** k for k in range(-3, 3))  # toolkit default, §C.6


@dataclass(frozen=True)
class LinearFit:
    """Stage models ``stage_weights [T, N, d]`` (the prediction of client i is
    ⟨Σ_t w_{t,i}, x⟩), chosen ``lambdas`` ([T] shared or [T, N] per client; inf = skipped
    stage) and the validation MSE of each partial ensemble at selection time ``val_mse [T]``."""

    name: str
    stage_weights: np.ndarray
    lambdas: np.ndarray
    val_mse: np.ndarray

    @property
    def weights(self) -> np.ndarray:
        """Final per-client model Σ_t w_{t,i} (eq. 8 with unit coefficients), [N, d]."""
        return self.stage_weights.sum(axis=0)

    def partial_weights(self, stages: int) -> np.ndarray:
        """Ensemble of the first ``stages`` stage models, [N, d]."""
        t = positive_int("stages", stages)
        if t > self.stage_weights.shape[0]:
            raise ValueError(f"stages must be <= {self.stage_weights.shape[0]}, got {t}")
        return self.stage_weights[:t].sum(axis=0)


def _split(n: int, n_clients: int, val_fraction: float, seed: int):
    n_val = int(round(val_fraction * n))
    if not 1 <= n_val <= n - 1:
        raise ValueError(f"val_fraction={val_fraction} leaves no train or no validation "
                         f"sample out of n={n}")
    order = np.argsort(np.random.default_rng(seed).random((n_clients, n)), axis=1)
    return order[:, n_val:], order[:, :n_val]


def _mse(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per-client MSE, broadcasting candidate axes in front of ``w [..., N, d]``."""
    return np.mean((y - np.einsum("ncd,...nd->...nc", x, w)) ** 2, axis=-1)


def _federated(x: np.ndarray, y: np.ndarray, lams: np.ndarray, solver: str) -> np.ndarray:
    """Candidate global models [G, N, d] (rows identical) for per-sample λ's ``lams [G]``."""
    n_clients, m, d = x.shape
    if solver == "pooled":
        w = ridge(x.reshape(1, n_clients * m, d), y.reshape(1, -1), lams[:, None] * x.size / d)
        w = w[:, 0, :]
    elif solver == "one_shot_average":
        w = ridge(x[None], y[None], lams[:, None] * m).mean(axis=1)
    else:
        raise ValueError(f"federated_solver must be 'pooled' or 'one_shot_average', got {solver!r}")
    return np.broadcast_to(w[:, None, :], (lams.size, n_clients, d)).copy()


def _personal(x: np.ndarray, r: np.ndarray, lams: np.ndarray) -> np.ndarray:
    """Candidate personal ridge fits [G, N, d] of residuals ``r`` (λ per-sample, [G] or [G, N])."""
    lam = np.broadcast_to(lams.reshape(lams.shape[0], -1), (lams.shape[0], x.shape[0]))
    return ridge(x[None], r[None], lam * x.shape[1])


def _sequences(grid: np.ndarray, k: int, decrease: str) -> np.ndarray:
    """All admissible per-sample λ sequences for ``k`` personal stages, [S, k]."""
    desc = grid[::-1]
    if decrease == "nonincreasing":
        seqs = list(itertools.combinations_with_replacement(desc, k))
    elif decrease == "strict":
        seqs = list(itertools.combinations(desc, k))
    else:
        seqs = list(itertools.product(grid, repeat=k))
    if not seqs:
        raise ValueError(f"decrease='strict' needs at least {k} grid values, got {grid.size}")
    return np.asarray(seqs, dtype=np.float64)


def _joint_scores(xt, rt, xv, rv, seqs: np.ndarray, svd=None) -> np.ndarray:
    """Validation MSE [S, N] of every λ sequence of personal residual stages.

    Exact and cheap in the right-singular basis of X_t = U diag(σ) Vᵀ (s = σ², z = Vᵀw,
    c = VᵀX_tᵀr = σ ⊙ Uᵀr; directions outside the row space stay 0): stage k solves
    z_k = (c − s ⊙ z_{<k}) / (s + m λ_k), all diagonal.  (SVD, not ``eigh``: batched
    ``eigh`` is pathologically slow with threaded OpenBLAS on a loaded machine.)"""
    m = xt.shape[1]
    u, sig, vh = np.linalg.svd(xt, full_matrices=False) if svd is None else svd
    s, v = sig ** 2, np.swapaxes(vh, 1, 2)
    c = sig * np.einsum("nmk,nm->nk", u, rt)
    z = np.zeros((seqs.shape[0],) + c.shape)
    for k in range(seqs.shape[1]):
        z = z + (c[None] - s[None] * z) / (s[None] + m * seqs[:, k, None, None])
    w = np.einsum("nde,sne->snd", v, z)
    return _mse(xv, rv, w)


def _memo(cache: dict | None, key, compute):
    """``compute()``, stored under ``key`` in ``cache`` (``None``: no caching) — the fits of
    :func:`fit_ppfe_linear_path` share identical sub-computations, so results are bit-identical."""
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def _fit(fed: LinearFederation, kinds: list[str], *, name: str, lambda_grid, val_fraction,
         lambda_selection, decrease, selection, federated_solver, refit, seed,
         cache: dict | None = None) -> LinearFit:
    grid = finite_array("lambda_grid", lambda_grid, ndim=1)
    if grid.size == 0 or np.any(grid <= 0):
        raise ValueError("lambda_grid must be a non-empty list of positive numbers")
    grid = np.sort(grid)
    in_range("val_fraction", val_fraction, 0.0, 1.0, closed=False)
    if lambda_selection not in ("shared", "per_client"):
        raise ValueError(f"lambda_selection must be 'shared' or 'per_client', got {lambda_selection!r}")
    if decrease not in ("nonincreasing", "strict", "none"):
        raise ValueError(f"decrease must be 'nonincreasing', 'strict' or 'none', got {decrease!r}")
    if selection not in ("joint", "greedy"):
        raise ValueError(f"selection must be 'joint' or 'greedy', got {selection!r}")
    x, y = fed.x_train, fed.y_train
    n_clients, n, d = x.shape
    tr, va = _split(n, n_clients, val_fraction, seed)
    rows, cols = np.arange(n_clients)[:, None], np.arange(n_clients)
    xt, yt, xv, yv = x[rows, tr], y[rows, tr], x[rows, va], y[rows, va]

    def pick(score: np.ndarray, shared: bool) -> np.ndarray:  # [C, N] -> index [N]
        if shared:
            return np.full(n_clients, np.argmin(score.mean(axis=1)))
        return np.argmin(score, axis=0)

    base_t, base_v = np.zeros((n_clients, d)), np.zeros((n_clients, d))
    chosen, prev = [], np.full(n_clients, np.inf)
    shared = lambda_selection == "shared"
    personal = [t for t, k in enumerate(kinds) if k == "personal"]
    for t, kind in enumerate(kinds):
        if kind == "personal" and selection == "joint":
            seqs = _sequences(grid, len(personal), decrease)
            svd = _memo(cache, "svd", lambda: np.linalg.svd(xt, full_matrices=False))
            score = _joint_scores(xt, yt - np.einsum("ncd,nd->nc", xt, base_t), xv,
                                  yv - np.einsum("ncd,nd->nc", xv, base_v), seqs, svd)
            chosen.extend(seqs[pick(score, shared)].T)
            break
        if kind == "federated":
            cand = _memo(cache, "fed0", lambda: _federated(xt, yt, grid, federated_solver))
        else:
            cand = _personal(xt, yt - np.einsum("ncd,nd->nc", xt, base_t), grid)
        score = _mse(xv, yv, base_v[None] + cand)  # [G, N]
        if kind == "personal" and t > personal[0] and decrease != "none":
            lam_c = grid[:, None]
            bad = lam_c > prev[None] if decrease == "nonincreasing" else lam_c >= prev[None]
            score = np.where(bad, np.inf, score)
        idx = pick(score, shared or kind == "federated")
        ok = np.isfinite(score[idx, cols])
        step = np.where(ok[:, None], cand[idx, cols], 0.0)
        base_t, base_v = base_t + step, base_v + step
        chosen.append(np.where(ok, grid[idx], np.inf))
        if kind == "personal":
            prev = chosen[-1]
    lams = np.stack(chosen)  # [T, N]
    selected = _refit(xt, yt, kinds, lams, federated_solver, cache, "train")
    val_mse = np.array([_mse(xv, yv, selected[: t + 1].sum(axis=0)).mean()
                        for t in range(len(kinds))])
    # refit on all training data, or keep the selection-time fits (train part only)
    stages = _refit(x, y, kinds, lams, federated_solver, cache, "all") if refit else selected
    return LinearFit(name, stages, lams[:, 0] if shared else lams, val_mse)


def _refit(x, y, kinds, lams, solver, cache=None, tag="") -> np.ndarray:
    """Fit the stages sequentially with fixed λ's (inf ⇒ zero stage), [T, N, d].  Stage t
    depends only on λ_0 … λ_t, so with a ``cache`` it is shared by every fit with that prefix."""
    n_clients, _, d = x.shape
    base, out = np.zeros((n_clients, d)), []
    for t, (kind, lam) in enumerate(zip(kinds, lams)):
        def stage(kind=kind, lam=lam, base=base):
            if kind == "federated":
                return _federated(x, y, lam[:1], solver)[0]
            finite = np.isfinite(lam)
            resid = y - np.einsum("ncd,nd->nc", x, base)
            w = _personal(x, resid, np.where(finite, lam, 1.0)[None])[0]
            return np.where(finite[:, None], w, 0.0)
        w = _memo(cache, ("refit", tag, tuple(kinds[: t + 1]), lams[: t + 1].tobytes()), stage)
        out.append(w)
        base = base + w
    return np.stack(out)


_DEFAULTS = dict(lambda_grid=DEFAULT_LAMBDA_GRID, val_fraction=0.2, lambda_selection="shared",
               decrease="nonincreasing", selection="joint", federated_solver="pooled", refit=True, seed=0)


def fit_ppfe_linear(fed: LinearFederation, *, num_stages: int = 4, **kw) -> LinearFit:
    """PPFE for linear regression: stage 0 federated ridge, stages 1..T−1 personal ridge on
    residuals (module docstring, readings 1–4).  Keyword options: ``lambda_grid``,
    ``val_fraction``, ``lambda_selection``, ``decrease``, ``federated_solver``, ``refit``,
    ``seed`` (validation split).  ``num_stages`` = T ≥ 1 (paper: 4)."""
    t = positive_int("num_stages", num_stages)
    kinds = ["federated"] + ["personal"] * (t - 1)
    return _fit(fed, kinds, name="PPFE", **{**_DEFAULTS, **kw})


def fit_ppfe_linear_path(fed: LinearFederation, *, max_stages: int, **kw) -> list[LinearFit]:
    """``[fit_ppfe_linear(fed, num_stages=T, **kw) for T in 1 … max_stages]``, bit-identical,
    at about half the cost: the fits share stage 0's candidates, the SVD of the personal
    stages' joint λ search and every refitted stage with the same λ prefix (a per-call
    cache; nothing is kept between calls)."""
    t_max = positive_int("max_stages", max_stages)
    opts, cache = {**_DEFAULTS, **kw}, {}
    return [_fit(fed, ["federated"] + ["personal"] * (t - 1), name="PPFE", cache=cache, **opts)
            for t in range(1, t_max + 1)]


def fit_local_ridge(fed: LinearFederation, **kw) -> LinearFit:
    """Local ridge baseline: client i fits ridge on its own data only, same tuning."""
    return _fit(fed, ["personal"], name="Local", **{**_DEFAULTS, **kw})


def fit_fedavg_ridge(fed: LinearFederation, **kw) -> LinearFit:
    """FedAvg ridge baseline: the federated stage alone (= PPFE with one stage)."""
    return _fit(fed, ["federated"], name="FedAvg", **{**_DEFAULTS, **kw})


def compare_methods(fed: LinearFederation, *, num_stages: int = 4, **kw) -> dict[str, dict]:
    """Fit PPFE, Local and FedAvg ridge; per method: mean test MSE, mean population MSE,
    and (PPFE) the test/population MSE of every partial ensemble."""
    out: dict[str, dict] = {}
    for fit in (fit_ppfe_linear(fed, num_stages=num_stages, **kw), fit_local_ridge(fed, **kw),
                fit_fedavg_ridge(fed, **kw)):
        entry = {"test_mse": float(test_mse(fed, fit.weights).mean()),
                 "population_mse": float(population_mse(fed, fit.weights).mean()),
                 "lambdas": fit.lambdas, "fit": fit}
        if fit.name == "PPFE":
            parts = [fit.partial_weights(s) for s in range(1, num_stages + 1)]
            entry["stage_test_mse"] = [float(test_mse(fed, w).mean()) for w in parts]
            entry["stage_population_mse"] = [float(population_mse(fed, w).mean()) for w in parts]
        out[fit.name] = entry
    return out
