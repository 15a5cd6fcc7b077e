"""Choosing CGPFL's number of contexts K: the clustering path over K and selectors on it.

Paper: Tang, Guo, Guo, *Personalized Federated Learning with Contextualized Generalization*
(IJCAI 2022), CGPFL-Heur's e(K) (eq. 11, docs/formulas.md §A.9) — the criterion itself is
:func:`pfl_theory.cgpfl.select_k`; this module holds what it is computed from and the
alternative criteria compared with it on the selection benchmark
(:mod:`verification.selection.k_benchmark`).

* :func:`cluster_path` — weighted k-means for K = 1 … k_max on the client models, computed
  **in normalised units**: the models are divided by their largest absolute entry, centred
  on their weighted mean and divided by the root weighted mean squared distance to that mean
  (so cost(1) = 1).  k-means is equivariant under translation and scaling, so the partition
  found does not depend on the units of the models, and models × 1e200 neither overflow nor
  change K̂.  Each K is the best of ``restarts`` k-means++ seedings and a warm start from the
  (K−1)-solution plus its farthest point (the cost is then non-increasing in K).
* :func:`mu_bands` — for each K that e(K) can choose, the band of μ that chooses it (e(K)
  is linear in μ: K̂(μ) is the lower envelope of the lines comp(K) + μ·cost(K));
  :func:`widest_band` — the rule ``mu="widest-band"`` of :func:`pfl_theory.cgpfl.select_k`
  (below); :func:`relative_cap` — the largest K the ``"relative"`` μ can ever choose.
* :func:`bic_curve` — the X-means BIC (Pelleg & Moore, ICML 2000) of a spherical Gaussian
  mixture with one shared variance: a scale-free alternative that needs no μ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pfl_theory.kmeans import KMeansResult, kmeans, lloyd
from pfl_theory.validation import finite_array, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["Normalised", "normalise_models", "ClusterPath", "cluster_path", "bic_curve",
           "MuBand", "mu_bands", "widest_band", "relative_cap"]


@dataclass(frozen=True)
class Normalised:
    """``z = (x / a − c) / s`` with ``a`` = max |x|, ``c`` the weighted mean of x / a and
    ``s`` the root weighted mean of ‖x / a − c‖²; ``scale = a·s`` (finite) is the RMS spread
    of the models around their weighted mean in their own units (0 if all models coincide)."""

    z: np.ndarray
    offset: np.ndarray   # a·c, the weighted mean model in original units
    scale: float         # a·s


def normalise_models(models: Any, weights: Any = None) -> Normalised:
    """Translate and scale ``models`` [N, d] to unit weighted spread (see :class:`Normalised`).

    ``weights`` [N] > 0 (default 1).  All models equal ⇒ ``z = 0`` and ``scale = 0``."""
    x = finite_array("client_models", models, ndim=2)
    w = np.ones(x.shape[0]) if weights is None else finite_array("weights", weights, ndim=1)
    if w.shape != (x.shape[0],) or np.any(w <= 0):
        raise ValueError(f"weights must be {x.shape[0]} positive numbers, got shape {w.shape}")
    w = w / w.sum()
    a = float(np.max(np.abs(x)))
    if a == 0.0:
        return Normalised(np.zeros_like(x), np.zeros(x.shape[1]), 0.0)
    y = x / a
    c = w @ y
    y = y - c
    s = float(np.sqrt(w @ (y * y).sum(1)))
    if s == 0.0:
        return Normalised(np.zeros_like(x), a * c, 0.0)
    return Normalised(y / s, a * c, a * s)


@dataclass(frozen=True)
class ClusterPath:
    """k-means of the normalised models for K = 1 … k_max: ``relative_costs[K−1]`` =
    Σ_i (w_i/Σw) ‖z_i − centre‖² (= cost(K)/cost(1); 1 at K = 1), ``clusterings`` in the
    original units (centres mapped back; ``inertia`` = relative cost × Σw), ``scale`` from
    :func:`normalise_models`, ``counts[K−1]`` the cluster sizes (number of models)."""

    ks: np.ndarray
    relative_costs: np.ndarray
    clusterings: tuple[KMeansResult, ...]
    scale: float
    counts: tuple[np.ndarray, ...]


def cluster_path(models: Any, *, weights: Any = None, k_max: int, restarts: int = 30,
                 seed: int = 0) -> ClusterPath:
    """Weighted k-means path K = 1 … ``k_max`` (≤ N) on normalised models (module docstring).

    ``restarts`` k-means++ seedings per K (seed ``seed + K``) plus the warm start from K−1.
    Restarts matter from K ≈ 6 on: with 10 restarts the cost at K = 8–9 was measured 1.4–2 %
    above a best-of-30 on planted federations (issue 16), hence the default 30."""
    norm = normalise_models(models, weights)
    z = norm.z
    n = z.shape[0]
    k_max = positive_int("k_max", k_max)
    if k_max > n:
        raise ValueError(f"k_max must be <= N = {n}, got {k_max}")
    restarts = positive_int("restarts", restarts)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    results: list[KMeansResult] = []
    for k in range(1, k_max + 1):
        best = kmeans(z, k, restarts=restarts, seed=seed + k, weights=w)
        if results:
            prev = results[-1]
            far = int(np.argmax(w * ((z - prev.centers[prev.labels]) ** 2).sum(1)))
            warm = lloyd(z, np.vstack([prev.centers, z[far]]), weights=w)
            if warm.inertia < best.inertia:
                best = warm
        results.append(best)
    rel = np.array([r.inertia for r in results]) / w.sum()
    back = tuple(KMeansResult(r.labels, norm.offset + norm.scale * r.centers, r.inertia,
                              r.n_iter, r.restart, r.history) for r in results)
    counts = tuple(np.bincount(r.labels, minlength=k) for k, r in zip(range(1, k_max + 1), results))
    return ClusterPath(np.arange(1, k_max + 1), rel, back, norm.scale, counts)


def bic_curve(path: ClusterPath, *, dim: int) -> np.ndarray:
    """X-means BIC(K) (Pelleg & Moore 2000, §3.2) of the path, lower is better:

        σ̂²_K = N·cost_rel(K) / (d (N − K)),
        log L_K = Σ_k n_k log(n_k / N) − (N d / 2) log(2π σ̂²_K) − d (N − K) / 2,
        BIC(K) = −2 log L_K + (K d + K) log N    (K d centres, K − 1 mixing weights, 1 variance).

    Clients count once each (n_k = models in cluster k).  Computed from the normalised costs,
    so it is scale-free (rescaling shifts log L by a K-independent constant).  K = N (σ̂² has
    no degrees of freedom) gets +inf; a zero cost gets σ̂² floored at 1e-300."""
    d = positive_int("dim", dim)
    n = int(sum(path.counts[0]))
    out = np.full(path.ks.size, np.inf)
    for i, (k, c, cnt) in enumerate(zip(path.ks, path.relative_costs, path.counts)):
        if k >= n:
            continue
        var = max(n * float(c) / (d * (n - k)), 1e-300)
        nk = cnt[cnt > 0].astype(np.float64)
        loglik = float((nk * np.log(nk / n)).sum()) - 0.5 * n * d * np.log(2 * np.pi * var) \
            - 0.5 * d * (n - k)
        out[i] = -2.0 * loglik + (k * d + k) * np.log(n)
    return out


@dataclass(frozen=True)
class MuBand:
    """K is argmin e(K) for every weight w of cost(K)/cost(1) in ``[lo, hi)`` (``hi`` = inf
    for the last K of the envelope); μ in the models' units is w / cost(1)."""

    k: int
    lo: float
    hi: float

    @property
    def decades(self) -> float:
        """log10(hi/lo): how far μ can move before K̂ changes (inf when lo = 0 or hi = inf)."""
        return float(np.log10(self.hi / self.lo)) if 0 < self.lo and np.isfinite(self.hi) \
            else float("inf")


def mu_bands(complexity: Any, relative_costs: Any) -> tuple[MuBand, ...]:
    """The bands of w ≥ 0 in which each K minimises ``complexity[K−1] + w·relative_costs[K−1]``
    (smallest K on ties), in increasing K.  Exact: the band edges are the crossing points
    w = (comp(K') − comp(K)) / (rel(K) − rel(K')) of two lines, and K̂(w) is constant
    between consecutive crossings, so evaluating it once inside each gap finds every band."""
    comp = finite_array("complexity", complexity, ndim=1)
    rel = finite_array("relative_costs", relative_costs, ndim=1)
    if comp.shape != rel.shape or comp.size == 0:
        raise ValueError("complexity and relative_costs must be equal-length, non-empty")

    def k_hat(w: float) -> int:
        return int(np.argmin(comp + w * rel)) + 1

    cross = {0.0}
    for a in range(comp.size):
        for b in range(a + 1, comp.size):
            if rel[a] > rel[b] and comp[b] > comp[a]:
                cross.add(float((comp[b] - comp[a]) / (rel[a] - rel[b])))
    edges = sorted(cross)
    probes = [(u + v) / 2 for u, v in zip(edges, edges[1:])] + [edges[-1] * 2 + 1.0]
    bands: list[MuBand] = []
    for lo, w in zip(edges, probes):
        k = k_hat(w)
        if bands and bands[-1].k == k:
            continue
        if bands:
            bands[-1] = MuBand(bands[-1].k, bands[-1].lo, lo)
        bands.append(MuBand(k, lo, float("inf")))
    return tuple(bands)


def widest_band(bands: Any) -> MuBand | None:
    """The band of the rule ``mu="widest-band"``: among the bands bounded on both sides
    (0 < lo, hi < inf: neither K = 1's nor the last K's, whose bands are unbounded whatever
    the data), the widest in log μ; ``None`` if there is none.  Its geometric centre
    √(lo·hi) is the μ chosen.  Why: a μ inside a wide band gives the same K̂ for any μ within
    a factor hi/lo, so the choice does not hinge on a value the paper leaves unprinted; and
    since a band's edges are ratios Δcomp/Δcost of neighbouring K, its width is the ratio
    of the cost drop into K to the drop out of it (× the ratio of complexity steps, ≈ 1):
    the widest band is the sharpest elbow of cost(K).  It reads only the uploads."""
    inner = [b for b in bands if b.lo > 0 and np.isfinite(b.hi)]
    return max(inner, key=lambda b: (b.decades, -b.k)) if inner else None


def relative_cap(complexity_at_1: float, k_max: int) -> int:
    """Largest K the relative μ (= 1/cost(1)) can choose: e(1) = c + 1 and e(K) ≥ c√K, so K
    beats K = 1 only if c(√K − 1) < 1 (c = complexity term at K = 1)."""
    c = float(complexity_at_1)
    ks = np.arange(1, int(k_max) + 1)
    return int(ks[c * (np.sqrt(ks) - 1) < 1].max())


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
