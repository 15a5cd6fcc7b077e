"""Federated data with a planted number K₀ of latent contexts (clusters of clients).

Built for CGPFL (Tang, Guo, Guo, IJCAI 2022, docs/formulas.md §A): its premise is that clients
fall into K latent contexts; these generators plant K₀ contexts and return the assignment
so that a selected K̂ (CGPFL-Heur, :func:`pfl_theory.cgpfl.select_k`) or a learned
clustering can be compared with the truth.

* :func:`classification_contexts` — K₀ context softmax models (W, b); client model = its
  context's model + τ·noise; features as in FedProx's Synthetic(α, β) (Li et al., MLSys
  2020): v_i ~ N(B_i, 1), B_i ~ N(0, β), x ~ N(v_i, Σ) with Σ_jj = (j+1)^{-1.2};
  labels y = argmax(xW_i + b_i).
* :func:`label_skew_contexts` — clients of one context share a subset of classes (e.g. 3 of
  10, as in CGPFL's IJCAI experiments) drawn from a labelled pool (X, y).
* :func:`regression_contexts` — linear regression y = ⟨w_i, x⟩ + ε with w_i = c_{k(i)} + τ·noise.
* :func:`planted_model_vectors` — model vectors only, for ``select_k`` experiments.

Assignment: context sizes are balanced (client i gets context ``perm(i) mod K₀`` for a
seeded permutation), so every context has ⌊N/K₀⌋ or ⌈N/K₀⌉ clients.  Sizes: uniform
integers in ``size_range`` or lognormal (median = geometric mean of the range, log-sd
``size_sigma``) clipped to the range.  All randomness from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pfl_theory.validation import finite_array, nonnegative, positive, positive_int

__all__ = ["ContextData", "classification_contexts", "label_skew_contexts",
           "regression_contexts", "planted_model_vectors", "planted_assignment"]


@dataclass(frozen=True)
class ContextData:
    """Per-client data lists plus the planted truth.

    ``xs[i]`` [n_i, dim] float64, ``ys[i]`` [n_i] (int64 labels or float64 targets),
    ``assignment`` [N] int64 context of each client, ``context_models`` one entry per
    context: (W [dim, C], b [C]) for classification, the class subset (int array) for label
    skew, the centre w [dim] for regression.  ``client_models`` one entry per client, the
    model its data were drawn from (its context's plus τ·noise): (W_i, b_i) for
    classification, w_i [dim] for regression; ``None`` for label skew (no client model).
    """

    xs: tuple[np.ndarray, ...]
    ys: tuple[np.ndarray, ...]
    assignment: np.ndarray
    context_models: tuple[Any, ...]
    client_models: tuple[Any, ...] | None = None


def _counts(num_clients: int, k0: int) -> tuple[int, int]:
    n = positive_int("num_clients", num_clients)
    k = positive_int("k0", k0)
    if k > n:
        raise ValueError(f"k0 must be <= num_clients = {n}, got {k}")
    return n, k


def planted_assignment(num_clients: int, k0: int, rng: np.random.Generator) -> np.ndarray:
    """Balanced random assignment of N clients to K₀ contexts (every context non-empty)."""
    n, k = _counts(num_clients, k0)
    return (rng.permutation(n) % k).astype(np.int64)


def _sizes(n: int, size_range: Sequence[int], dist: str, sigma: float,
           rng: np.random.Generator) -> np.ndarray:
    if len(size_range) != 2:
        raise ValueError(f"size_range must be (low, high), got {size_range!r}")
    lo, hi = positive_int("size_range[0]", size_range[0]), positive_int("size_range[1]", size_range[1])
    if lo > hi:
        raise ValueError(f"size_range must satisfy low <= high, got {size_range!r}")
    if dist == "uniform":
        return rng.integers(lo, hi + 1, size=n)
    if dist == "lognormal":
        sigma = positive("size_sigma", sigma)
        raw = np.exp(rng.normal(0.5 * (np.log(lo) + np.log(hi)), sigma, size=n))
        return np.clip(np.round(raw), lo, hi).astype(np.int64)
    raise ValueError(f"sizes must be 'uniform' or 'lognormal', got {dist!r}")


def classification_contexts(num_clients: int, k0: int, *, dim: int = 60, num_classes: int = 10,
                            separation: float = 1.0, tau: float = 0.1, beta: float = 0.5,
                            size_range: Sequence[int] = (50, 200), sizes: str = "uniform",
                            size_sigma: float = 1.0, feature_shift: float = 1.0,
                            seed: int = 0) -> ContextData:
    """Planted-context softmax classification.

    Context models W_k ~ N(0, separation²) [dim, C], b_k ~ N(0, separation²) [C]; client
    i's model (W_k + τZ, b_k + τz); features x ~ N(v_i, diag((j+1)^{-1.2})) with
    v_i = feature_shift · N(B_i, 1), B_i ~ N(0, β); y = argmax(xW+b).  ``feature_shift=1``
    is FedProx Synthetic(α, β)'s feature law; there each client's own mean shift dominates
    its label mix, so the contexts are only partly visible in the client models (k-means on
    per-client least-squares fits put 60–80% of clients right, 24 clients, K₀=3).
    ``feature_shift=0`` (shared feature law) makes the contexts the only structure (100%).
    The random draws are the same for every ``feature_shift``.
    """
    n, k = _counts(num_clients, k0)
    dim, c = positive_int("dim", dim), positive_int("num_classes", num_classes, minimum=2)
    sep, tau, beta = positive("separation", separation), nonnegative("tau", tau), nonnegative("beta", beta)
    shift = nonnegative("feature_shift", feature_shift)
    rng = np.random.default_rng(seed)
    assign = planted_assignment(n, k, rng)
    ctx = tuple((sep * rng.normal(size=(dim, c)), sep * rng.normal(size=c)) for _ in range(k))
    counts = _sizes(n, size_range, sizes, size_sigma, rng)
    scale = np.arange(1, dim + 1, dtype=np.float64) ** -0.6  # sd = ((j+1)^-1.2)^(1/2)
    xs, ys, models = [], [], []
    for i in range(n):
        w, b = ctx[assign[i]]
        w_i, b_i = w + tau * rng.normal(size=w.shape), b + tau * rng.normal(size=b.shape)
        v = shift * rng.normal(rng.normal(0.0, np.sqrt(beta)), 1.0, size=dim)
        x = v + scale * rng.normal(size=(counts[i], dim))
        xs.append(x)
        ys.append(np.argmax(x @ w_i + b_i, axis=1).astype(np.int64))
        models.append((w_i, b_i))
    return ContextData(tuple(xs), tuple(ys), assign, ctx, tuple(models))


def _class_subsets(classes: np.ndarray, k: int, per: int, rng: np.random.Generator) -> list[np.ndarray]:
    from math import comb

    if per > classes.size:
        raise ValueError(f"classes_per_context={per} exceeds the {classes.size} classes present")
    if comb(classes.size, per) < k:
        raise ValueError(f"only {comb(classes.size, per)} distinct {per}-class subsets exist, "
                         f"fewer than k0={k}")
    seen: list[tuple[int, ...]] = []
    while len(seen) < k:  # distinct subsets; terminates since enough subsets exist
        s = tuple(sorted(rng.choice(classes, size=per, replace=False).tolist()))
        if s not in seen:
            seen.append(s)
    return [np.array(s, dtype=np.int64) for s in seen]


def label_skew_contexts(x: Any, y: Any, num_clients: int, k0: int, *, classes_per_context: int = 3,
                        size_range: Sequence[int] = (50, 200), seed: int = 0) -> ContextData:
    """Label-skew contexts from a labelled pool: context k owns a random subset of
    ``classes_per_context`` classes (subsets distinct across contexts); each client draws
    n_i ~ U{size_range} samples *without replacement* (no sample shared between clients),
    split as evenly as possible over its context's classes.  Raises ValueError if a class
    runs out (lower the sizes).  ``x`` [M, ...], ``y`` [M] integer labels.
    """
    n, k = _counts(num_clients, k0)
    xa, ya = np.asarray(x), np.asarray(y)
    if ya.ndim != 1 or xa.shape[:1] != ya.shape or not np.issubdtype(ya.dtype, np.integer):
        raise ValueError(f"y must be 1-D integer labels matching x's first axis; got x "
                         f"{xa.shape}, y {ya.shape} ({ya.dtype})")
    per = positive_int("classes_per_context", classes_per_context)
    rng = np.random.default_rng(seed)
    assign = planted_assignment(n, k, rng)
    subsets = _class_subsets(np.unique(ya), k, per, rng)
    pools = {int(c): list(rng.permutation(np.flatnonzero(ya == c))) for c in np.unique(ya)}
    counts = _sizes(n, size_range, "uniform", 1.0, rng)
    xs, ys = [], []
    for i in range(n):
        cls = subsets[assign[i]]
        share = np.full(per, counts[i] // per) + (np.arange(per) < counts[i] % per)
        idx = []
        for c, s in zip(cls.tolist(), share.tolist()):
            if len(pools[c]) < s:
                raise ValueError(f"class {c} has too few samples left for client {i}; "
                                 "use a smaller size_range or more data")
            idx += [pools[c].pop() for _ in range(s)]
        idx = np.array(idx, dtype=np.int64)
        xs.append(xa[idx])
        ys.append(ya[idx].astype(np.int64))
    return ContextData(tuple(xs), tuple(ys), assign, tuple(subsets))


def regression_contexts(num_clients: int, k0: int, *, dim: int = 20, separation: float = 1.0,
                        tau: float = 0.1, noise: float = 0.1, size_range: Sequence[int] = (50, 200),
                        sizes: str = "uniform", size_sigma: float = 1.0, seed: int = 0) -> ContextData:
    """Linear regression with K₀ context centres c_k ~ N(0, separation² I_dim):
    w_i = c_{k(i)} + τ·N(0, I), x ~ N(0, I_dim), y = ⟨w_i, x⟩ + noise·N(0, 1); the w_i are
    returned as ``client_models``."""
    n, k = _counts(num_clients, k0)
    dim = positive_int("dim", dim)
    sep, tau, noise = positive("separation", separation), nonnegative("tau", tau), nonnegative("noise", noise)
    rng = np.random.default_rng(seed)
    assign = planted_assignment(n, k, rng)
    centres = tuple(sep * rng.normal(size=dim) for _ in range(k))
    counts = _sizes(n, size_range, sizes, size_sigma, rng)
    xs, ys, models = [], [], []
    for i in range(n):
        w_i = centres[assign[i]] + tau * rng.normal(size=dim)
        x = rng.normal(size=(counts[i], dim))
        xs.append(x)
        ys.append(x @ w_i + noise * rng.normal(size=counts[i]))
        models.append(w_i)
    return ContextData(tuple(xs), tuple(ys), assign, centres, tuple(models))


def planted_model_vectors(num_clients: int, k0: int, dim: int, *, separation: float,
                          noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Client model vectors around K₀ centres: θ_i = c_{k(i)} + noise·N(0, I_dim).

    Centres are Gaussian directions rescaled so the *minimum* pairwise centre distance is
    exactly ``separation`` (K₀ = 1: the single centre is 0).  Within-context spread is
    about noise·√dim.  Returns (vectors [N, dim], assignment [N]).
    """
    n, k = _counts(num_clients, k0)
    dim = positive_int("dim", dim)
    sep, noise = positive("separation", separation), nonnegative("noise", noise)
    rng = np.random.default_rng(seed)
    assign = planted_assignment(n, k, rng)
    centres = rng.normal(size=(k, dim))
    if k > 1:
        gaps = np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))
        centres *= sep / gaps[np.triu_indices(k, 1)].min()
    else:
        centres[:] = 0.0
    vectors = centres[assign] + noise * rng.normal(size=(n, dim))
    return finite_array("vectors", vectors), assign
