"""The CGPFL oracles' own clustering: plain k-means++ and Lloyd, one restart and one point at a
time in numpy, sharing no code with :mod:`pfl_theory.kmeans` or
:mod:`pfl_theory.cgpfl_selection` (issue 41: the oracles called the engine's k-means and
K-selection, so a defect there was invisible to them).

What is shared is the *specification* the engine documents (pfl_theory/kmeans.py and
cgpfl_selection.py module docstrings; CGPFL, Tang, Guo, Guo, IJCAI 2022, Algorithm 1 step 3,
and CGPFL-Heur's e(K), eq. 11, docs/formulas.md §A.5, §A.9), read again here:

* seeding: the uniforms ``default_rng(seed).random((restarts, k))``; restart r draws its
  j-th centre as the first index whose cumulative weight (w_i, then w_i·D²) exceeds
  u[r, j] × the total (all D² zero: by w);
* Lloyd: nearest centre (lowest index on ties); stop when the labels repeat; weighted means;
  a cluster left empty takes the point of largest weighted distance from a cluster of ≥ 2;
* best restart: the lowest inertia (first on ties);
* K-selection: models divided by max |x|, centred on the weighted mean, scaled to unit RMS
  spread; K = 1 … k_max the best of the restarts (seed + K) or the warm start (K−1 centres plus
  the farthest point); e(K) = √((dK/m) log(em/d)) + μ·cost(K) with μ·cost(1) = 1 ("relative")
  or a given μ; K̂ the first argmin;
* a context keeps its identity across rounds: new centres matched to the old ones by the
  permutation of least total squared distance (brute force over the k! permutations).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def _sq(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """[N, k] squared distances, point by point."""
    return np.array([[float(((xi - cj) ** 2).sum()) for cj in c] for xi in x])


def _seed_centres(x: np.ndarray, w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """k-means++ for one restart from its k uniforms ``u``."""
    def draw(p: np.ndarray, uj: float) -> int:
        if p.sum() <= 0:
            p = w
        cdf = np.cumsum(p)
        idx = int(np.searchsorted(cdf, uj * cdf[-1], side="right"))
        return min(idx, len(p) - 1)

    picks = [draw(w, u[0])]
    d2 = _sq(x, x[picks])[:, 0]
    d2[picks[0]] = 0.0
    for uj in u[1:]:
        picks.append(draw(w * d2, uj))
        d2 = np.minimum(d2, _sq(x, x[picks[-1:]])[:, 0])
        d2[picks[-1]] = 0.0
    return x[picks].copy()


def _lloyd(x: np.ndarray, w: np.ndarray, c: np.ndarray, max_iter: int = 100):
    labels = None
    for _ in range(max_iter):
        d2 = _sq(x, c)
        new = d2.argmin(1)
        k = c.shape[0]
        counts = np.bincount(new, minlength=k)
        for e in np.flatnonzero(counts == 0):
            contrib = w * d2[np.arange(len(x)), new]
            movable = (counts[new] >= 2) & (contrib > 0)
            if not movable.any():
                break
            p = int(np.argmax(np.where(movable, contrib, -1.0)))
            counts[new[p]] -= 1
            counts[e] += 1
            new[p] = e
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            if (labels == j).any():
                mask = labels == j
                c[j] = (w[mask, None] * x[mask]).sum(0) / w[mask].sum()
    if labels is None:
        labels = _sq(x, c).argmin(1)
    inertia = float(sum(w[i] * ((x[i] - c[labels[i]]) ** 2).sum() for i in range(len(x))))
    return labels, c, inertia


def plain_kmeans(points, k: int, *, restarts: int, seed: int, weights=None):
    """``(labels, centres, inertia)`` of the best of ``restarts`` k-means++ + Lloyd runs."""
    x = np.asarray(points, dtype=np.float64)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
    u = np.random.default_rng(int(seed)).random((restarts, k))
    best = None
    for r in range(restarts):
        run = _lloyd(x, w, _seed_centres(x, w, u[r]))
        if best is None or run[2] < best[2]:
            best = run
    return best


def aligned(labels: np.ndarray, centres: np.ndarray, old: np.ndarray) -> np.ndarray:
    """``labels`` renamed so that cluster j is the new centre closest (jointly) to old j."""
    k = len(old)
    best = min(itertools.permutations(range(k)),
               key=lambda p: sum(float(((old[j] - centres[p[j]]) ** 2).sum()) for j in range(k)))
    rename = np.empty(k, dtype=int)
    for j, pj in enumerate(best):
        rename[pj] = j
    return rename[np.asarray(labels)]


def _widest_band_weight(comp, rel, fallback: float) -> float:
    """The documented rule "widest-band", written here as each K's own interval: K is the
    argmin for w in (max_{K'<K} (comp_K − comp_K')/(rel_K' − rel_K), min_{K'>K} (comp_K' −
    comp_K)/(rel_K − rel_K')); among intervals bounded on both sides (lo > 0, hi < inf) the
    widest in log w, smallest K on ties; w = √(lo·hi); ``fallback`` when none."""
    best = None
    n = len(comp)
    for k in range(n):
        lo = max([(comp[k] - comp[j]) / (rel[j] - rel[k]) if rel[j] > rel[k] else math.inf
                  for j in range(k)], default=0.0)
        hi = min([(comp[j] - comp[k]) / (rel[k] - rel[j]) if rel[k] > rel[j] else math.inf
                  for j in range(k + 1, n)], default=math.inf)
        if 0 < lo < hi < math.inf:
            width = math.log(hi / lo)
            if best is None or width > best[0]:
                best = (width, math.sqrt(lo * hi))
    return fallback if best is None else best[1]


def plain_select_k(models, *, sizes, k_max: int, restarts: int, seed: int,
                   mu="relative") -> tuple[int, np.ndarray]:
    """CGPFL-Heur's ``(K̂, labels)`` from the models ``[N, d]`` and client ``sizes``."""
    x = np.asarray(models, dtype=np.float64)
    w = np.asarray(sizes, dtype=np.float64)
    p = w / w.sum()
    a = float(np.abs(x).max())
    y = x / a if a > 0 else x
    y = y - p @ y
    s = math.sqrt(float(p @ (y * y).sum(1)))
    z = y / s if s > 0 else np.zeros_like(y)
    runs = []
    for k in range(1, k_max + 1):
        best = plain_kmeans(z, k, restarts=restarts, seed=seed + k, weights=w)
        if runs:
            lab, cen, _ = runs[-1]
            far = int(np.argmax(w * ((z - cen[lab]) ** 2).sum(1)))
            warm = _lloyd(z, w, np.vstack([cen, z[far]]))
            if warm[2] < best[2]:
                best = warm
        runs.append(best)
    rel = np.array([r[2] for r in runs]) / w.sum()
    m, d = float(w.sum()), x.shape[1]
    ks = np.arange(1, k_max + 1)
    comp = np.sqrt(d * ks / m * math.log(math.e * m / d))
    weight = (1.0 if s > 0 else 0.0) if mu in ("relative", "widest-band") \
        else float(mu) * (a * s) ** 2
    if mu == "widest-band" and s > 0:
        weight = _widest_band_weight(comp, rel, weight)
    e = comp + weight * rel
    k_hat = int(ks[int(np.argmin(e))])
    return k_hat, runs[k_hat - 1][0]
