"""Weighted k-means (k-means++ seeding + Lloyd iterations), batched over restarts.

Used by CGPFL (Tang, Guo, Guo, IJCAI 2022, Algorithm 1 step 3 / docs/formulas.md §A.5): the
server clusters the uploaded local copies of the generalized models with k-means++, and
by CGPFL-Heur's e(K) selector (:func:`pfl_theory.cgpfl.select_k`).

Objective (the CGPFL lower level of eq. (2) times N when all weights are 1)::

    inertia(labels, centers) = sum_i w_i * || x_i - c_{labels_i} ||^2

* Seeding: k-means++ (Arthur & Vassilvitskii 2007): first centre drawn with probability
  ∝ w_i, each further centre with probability ∝ w_i * D(x_i)^2 (D = distance to the
  nearest centre chosen so far).  All ``restarts`` seedings and Lloyd runs are computed
  at once on tensors of shape ``[restarts, N, k]``; the restart with the lowest inertia
  wins (lowest restart index on ties).
* Lloyd: assignment to the nearest centre (ties -> lowest centre index), then weighted
  means.  Stops when the labels do not change or after ``max_iter`` updates.  Each step
  never increases the objective.  Distances are computed from differences (exact) when
  restarts·N·k·d ≤ 2·10⁶; above that by the expansion ``|x|^2 - 2x.c + |c|^2`` with one
  matmul (then monotone up to float64 rounding of the expansion).  Small CPU problems run
  with one torch thread (see ``_serial_if_small``).
* Cost: the differences are formed in cache-sized row blocks (``_BLOCK``), Lloyd's small-path
  centre sums one restart at a time, and k-means++ reads the N² pairwise distances computed
  once when its R(k−1) steps would compute more; each is the same arithmetic per element as
  the one-shot formula, so the results are bit-identical to it
  (tests/pfl_theory/test_kmeans_blocked.py; CGPFL round at N = 100, d = 610, R = 3:
  benchmarks/bench_cgpfl.py --contexts).
* Empty clusters: if a cluster receives no point during Lloyd, it is re-seeded with the
  point of largest weighted distance to its centre taken from a cluster with at least two
  points (the objective strictly decreases by that point's contribution).  If no point has
  a positive distance (the data have fewer than ``k`` distinct points, e.g. duplicates with
  ``k = N``), the cluster stays empty: its centre is a duplicate of a data point (from the
  seeding) and no label points to it.  This is the only case in which a returned cluster
  is empty; the inertia is then 0.
* k-means++ when every remaining D^2 is 0 (duplicates): the next centre is drawn ∝ w_i.

Randomness: all uniforms come from ``numpy.random.default_rng(seed)`` (on the CPU), so the
same seed gives the same clustering on any device.  Arithmetic is float64.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from pfl_theory.validation import NonFiniteValueError, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["KMeansResult", "kmeans", "lloyd", "match_clusters", "align_result", "inertia"]


@dataclass(frozen=True)
class KMeansResult:
    """Best restart of :func:`kmeans` (or the result of :func:`lloyd`).

    ``labels`` [N] int64, ``centers`` [k, d] (numpy in -> numpy out; torch in -> torch out on
    the input's device, centres in the input's floating dtype), ``inertia`` the weighted
    sum of squared distances, ``n_iter`` Lloyd updates performed, ``restart`` the index of
    the winning restart, ``history`` the objective after each Lloyd update (non-increasing;
    computed from differences when restarts*N*d <= 4e6, else by the distance expansion).
    """

    labels: Any
    centers: Any
    inertia: float
    n_iter: int = 0
    restart: int = 0
    history: tuple[float, ...] = ()


def _prepare(points: Any, weights: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
    if isinstance(points, torch.Tensor):
        out_kind: Any = (points.device, points.dtype if points.is_floating_point() else torch.float64)
        x = points.detach().to(torch.float64)
    else:
        out_kind = None
        x = torch.as_tensor(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"points must have shape [N, d] with N, d >= 1, got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise NonFiniteValueError("points contain NaN or inf")
    if weights is None:
        w = torch.ones(x.shape[0], dtype=torch.float64, device=x.device)
    else:
        w = torch.as_tensor(np.asarray(weights.detach().cpu() if isinstance(weights, torch.Tensor)
                                       else weights, dtype=np.float64)).to(x.device)
        if w.shape != (x.shape[0],):
            raise ValueError(f"weights must have shape [{x.shape[0]}], got {tuple(w.shape)}")
        if not bool(torch.isfinite(w).all()) or bool((w <= 0).any()):
            raise ValueError("weights must be finite and > 0")
    return x, w, out_kind


def _export(labels: torch.Tensor, centers: torch.Tensor, out_kind: Any) -> tuple[Any, Any]:
    if out_kind is None:
        return labels.cpu().numpy().astype(np.int64), centers.cpu().numpy()
    device, dtype = out_kind
    return labels.to(device=device, dtype=torch.long), centers.to(device=device, dtype=dtype)


_DIFF_LIMIT = 2_000_000  # R*N*k*d up to which distances are computed from differences
_BLOCK = 1 << 18  # elements of one block of differences (2 MiB in float64: stays in cache)
_PAIRWISE_LIMIT = 4_000_000  # N^2 up to which k-means++ may precompute all pairwise distances


def _sq_dists(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``[R, N, k]`` squared distances: from differences (exact, no BLAS threads) for small
    problems, else by the expansion |x|^2 - 2 x.c + |c|^2 (clamped >= 0) with one matmul."""
    r, k, d = c.shape
    if r * x.shape[0] * k * d <= _DIFF_LIMIT:
        return _diff_sq_dists(x, c)
    xx = (x * x).sum(-1)[None, :, None]
    cc = (c * c).sum(-1)[:, None, :]
    xc = (x @ c.reshape(r * k, d).T).reshape(x.shape[0], r, k).permute(1, 0, 2)
    return (xx - 2.0 * xc + cc).clamp_min_(0.0)


def _diff_sq_dists(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``[R, N, k]`` squared distances from differences, ``((x - c) ** 2).sum(-1)``."""
    r, k, d = c.shape
    n = x.shape[0]
    # Row blocks of <= _BLOCK differences (cache-sized: no page faults, one pass over
    # memory): per element the same subtraction, product (``t * t`` is ``t ** 2`` exactly)
    # and contiguous last-dim sum as the one-shot ``((x - c) ** 2).sum(-1)``, so the same
    # bits (tests/pfl_theory/test_kmeans_blocked.py compares the two).
    out = torch.empty(r, n, k, dtype=torch.promote_types(x.dtype, c.dtype), device=x.device)
    rows = max(1, _BLOCK // (r * k * d))
    for a in range(0, n, rows):
        t = x[None, a:a + rows, None, :] - c[:, None, :, :]
        t.mul_(t)
        out[:, a:a + rows] = t.sum(-1)
    return out


_EXACT_LIMIT = 4_000_000  # R*N*d above which the per-iteration history uses the expansion


def _objective(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, labels: torch.Tensor,
               d2: torch.Tensor | None = None) -> torch.Tensor:
    """Per-restart objective ``[R]``: exact differences for small problems, else the
    expansion (``d2`` = precomputed squared distances to ``c``, reused when given)."""
    if c.shape[0] * x.shape[0] * x.shape[1] <= _EXACT_LIMIT:
        return _exact_inertia(x, w, c, labels)
    d2 = _sq_dists(x, c) if d2 is None else d2
    return (d2.gather(2, labels[..., None])[..., 0] * w).sum(1)


def _exact_inertia(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-restart objective computed from differences (no expansion), shape ``[R]``."""
    if c.shape[0] * x.shape[0] * x.shape[1] <= _EXACT_LIMIT:  # one vectorised op
        rows = torch.arange(c.shape[0], device=c.device)[:, None]
        own = c[rows, labels]  # [R, N, d], the same copies as a gather along dim 1, faster
        return (((x[None] - own) ** 2).sum(-1) * w).sum(1)
    return torch.stack([(((x - c[r][labels[r]]) ** 2).sum(-1) * w).sum() for r in range(c.shape[0])])


def _kmeanspp(x: torch.Tensor, w: torch.Tensor, k: int, restarts: int, rng: np.random.Generator) -> torch.Tensor:
    n = x.shape[0]
    u = torch.as_tensor(rng.random((restarts, k)), device=x.device)
    rows = torch.arange(restarts, device=x.device)

    def draw(p: torch.Tensor, uj: torch.Tensor) -> torch.Tensor:
        total = p.sum(1, keepdim=True)
        p = torch.where(total > 0, p, w.expand_as(p))  # all D^2 = 0: draw ∝ w
        cdf = torch.cumsum(p, 1)
        idx = torch.searchsorted(cdf, (uj * cdf[:, -1])[:, None].contiguous(), right=True)
        return idx[:, 0].clamp_max(n - 1)

    # Distances to the R centres drawn in a step: ``_sq_dists(x, x[idx][:, None, :])``.  When
    # that is the difference path and the k-1 steps would compute more distances than all
    # N^2 pairs (R(k-1) > N), the pairs are computed once (by the same differences, hence
    # the same bits) and each step reads R rows of them.
    pairwise = None
    if (1 < k and n < restarts * (k - 1) and n * n <= _PAIRWISE_LIMIT
            and restarts * n * x.shape[1] <= _DIFF_LIMIT):
        pairwise = _diff_sq_dists(x, x[None])[0]  # [N, N]

    def to_centres(idx: torch.Tensor) -> torch.Tensor:
        if pairwise is not None:
            return pairwise[idx]
        return _sq_dists(x, x[idx][:, None, :])[..., 0]

    idx = draw(w.expand(restarts, n), u[:, 0])
    chosen = [idx]
    d2 = to_centres(idx)
    d2[rows, idx] = 0.0
    for j in range(1, k):
        idx = draw(w * d2, u[:, j])
        chosen.append(idx)
        d2 = torch.minimum(d2, to_centres(idx))
        d2[rows, idx] = 0.0
    return x[torch.stack(chosen, 1)]  # [R, k, d]


def _reseed_empty(x, w, c, labels, d2) -> None:
    """In place: move far points into empty clusters (see module docstring)."""
    r_, k = c.shape[:2]
    flat = labels + k * torch.arange(r_, device=labels.device)[:, None]
    all_counts = torch.bincount(flat.flatten(), minlength=r_ * k).reshape(r_, k)
    for r in (all_counts == 0).any(1).nonzero().flatten().tolist():
        counts = all_counts[r]
        empty = (counts == 0).nonzero().flatten().tolist()
        contrib = w * d2[r].gather(1, labels[r][:, None])[:, 0]
        for e in empty:
            movable = (counts[labels[r]] >= 2) & (contrib > 0)
            if not bool(movable.any()):
                break
            p = int(torch.where(movable, contrib, torch.full_like(contrib, -1.0)).argmax())
            counts[labels[r][p]] -= 1
            counts[e] += 1
            labels[r][p] = e
            contrib[p] = 0.0


def _lloyd_batched(x, w, c, max_iter: int):
    """Lloyd from centres ``c`` [R, k, d]; returns labels [R, N], centres, n_iter, history [it, R]."""
    k = c.shape[1]
    wx = w[:, None] * x
    labels = buf = None
    history = []
    n_iter = 0
    for _ in range(max_iter):
        d2 = _sq_dists(x, c)
        if labels is not None:  # objective of the previous update, reusing d2
            history.append(_objective(x, w, c, labels, d2))
        new = d2.argmin(-1)
        _reseed_empty(x, w, c, new, d2)
        if labels is not None and torch.equal(new, labels):
            break
        labels = new
        mass = torch.zeros(c.shape[:2], dtype=x.dtype, device=x.device)
        mass.scatter_add_(1, labels, w.expand_as(labels))  # [R, k] weighted counts
        onehot = torch.nn.functional.one_hot(labels, k).to(x.dtype)  # [R, N, k]
        if c.numel() * x.shape[0] <= _DIFF_LIMIT:  # small: elementwise, no BLAS threads
            # one restart at a time in a reused buffer: the same products and the same
            # sum over N as ``(onehot[..., None] * wx[None, :, None, :]).sum(1)`` (same bits)
            buf = torch.empty(x.shape[0], k, x.shape[1], dtype=x.dtype, device=x.device) \
                if buf is None else buf
            sums = torch.empty_like(c)
            for r in range(c.shape[0]):
                torch.mul(onehot[r, :, :, None], wx[:, None, :], out=buf)
                sums[r] = buf.sum(0)
        else:  # large: one matmul [R*k, N] @ [N, d]
            sums = (onehot.transpose(1, 2).reshape(-1, x.shape[0]) @ wx).reshape(c.shape)
        c = torch.where(mass[..., None] > 0, sums / mass.clamp_min(1e-300)[..., None], c)
        n_iter += 1
    if labels is None:  # max_iter == 0: assignment only
        labels = _sq_dists(x, c).argmin(-1)
    if len(history) < max(n_iter, 1):
        history.append(_objective(x, w, c, labels))
    hist = torch.stack(history)
    return labels, c, n_iter, hist


@contextmanager
def _serial_if_small(x: torch.Tensor, size: int):
    """Small CPU problems run with one torch thread: intra-op parallelism brings nothing at
    this size and costs 10-100x on an oversubscribed machine (measured on 2 shared cores)."""
    n_threads = torch.get_num_threads()
    if x.device.type != "cpu" or size > _DIFF_LIMIT or n_threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n_threads)


def kmeans(points: Any, k: int, *, restarts: int = 10, seed: int = 0, max_iter: int = 100,
           weights: Any = None) -> KMeansResult:
    """Weighted k-means with k-means++ seeding; best of ``restarts`` seeded restarts.

    Args:
        points: ``[N, d]`` array or tensor (rows are the objects clustered, e.g. the clients'
            uploaded model vectors ω̃_{i,R}, i.e. the columns of the paper's Ω_{I,R}).
        k: number of clusters, 1 <= k <= N (``K > N`` raises ValueError).
        restarts: independent k-means++ seedings (batched), the best inertia is returned.
        seed: seed of the numpy generator drawing every uniform; same seed => same result.
        max_iter: maximal Lloyd updates per restart.
        weights: optional positive ``[N]`` point weights (e.g. sample sizes m_i); default 1.
    """
    x, w, out_kind = _prepare(points, weights)
    n = x.shape[0]
    k = positive_int("k", k)
    if k > n:
        raise ValueError(f"k must be <= N (number of points) = {n}, got k={k}")
    restarts = positive_int("restarts", restarts)
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    with _serial_if_small(x, restarts * n * k * x.shape[1]):
        c0 = _kmeanspp(x, w, k, restarts, rng)
        labels, c, n_iter, hist = _lloyd_batched(x, w, c0, max_iter)
        final = hist[-1]
        best = int(torch.argmin(final))  # first minimum on ties
        exact = float(_exact_inertia(x, w, c[best][None], labels[best][None])[0])
    lab, cen = _export(labels[best], c[best], out_kind)
    return KMeansResult(lab, cen, exact, n_iter, best,
                        tuple(float(v) for v in hist[:, best]))


def lloyd(points: Any, centers: Any, *, weights: Any = None, max_iter: int = 100) -> KMeansResult:
    """Lloyd iterations from given initial ``centers`` [k, d] (deterministic, no seeding).

    Same objective, tie-breaking and empty-cluster rule as :func:`kmeans`; ``history`` holds
    the objective after each update (non-increasing). Used for warm starts (e.g. K -> K+1).
    """
    x, w, out_kind = _prepare(points, weights)
    c = torch.as_tensor(np.asarray(centers.detach().cpu() if isinstance(centers, torch.Tensor)
                                   else centers, dtype=np.float64)).to(x.device)
    if c.ndim != 2 or c.shape[1] != x.shape[1] or not 1 <= c.shape[0] <= x.shape[0]:
        raise ValueError(f"centers must have shape [k, {x.shape[1]}] with 1 <= k <= "
                         f"{x.shape[0]}, got {tuple(c.shape)}")
    if not bool(torch.isfinite(c).all()):
        raise ValueError("centers contain NaN or inf")
    max_iter = positive_int("max_iter", max_iter, minimum=0)
    with _serial_if_small(x, c.numel() * x.shape[0]):
        labels, c, n_iter, hist = _lloyd_batched(x, w, c[None], max_iter)
        exact = float(_exact_inertia(x, w, c, labels)[0])
    lab, cen = _export(labels[0], c[0], out_kind)
    return KMeansResult(lab, cen, exact, n_iter, 0, tuple(float(v) for v in hist[:, 0]))


def inertia(points: Any, labels: Any, centers: Any, *, weights: Any = None) -> float:
    """``sum_i w_i ||x_i - c_{labels_i}||^2`` computed from differences (float64)."""
    x, w, _ = _prepare(points, weights)
    lab = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels,
                                     dtype=np.int64)).to(x.device)
    c = torch.as_tensor(np.asarray(centers.detach().cpu() if isinstance(centers, torch.Tensor)
                                   else centers, dtype=np.float64)).to(x.device)
    if lab.shape != (x.shape[0],) or c.ndim != 2 or c.shape[1] != x.shape[1]:
        raise ValueError("labels must be [N] and centers [k, d] matching points [N, d]")
    if bool((lab < 0).any()) or bool((lab >= c.shape[0]).any()):
        raise ValueError(f"labels must lie in [0, {c.shape[0]})")
    return float(_exact_inertia(x, w, c[None], lab[None])[0])


def _np(a: Any) -> np.ndarray:
    return np.asarray(a.detach().cpu() if isinstance(a, torch.Tensor) else a, dtype=np.float64)


def match_clusters(old_centers: Any, new_centers: Any) -> np.ndarray:
    """Hungarian matching of new centres to old ones (min total squared distance).

    Returns ``perm`` (int64 [k]) with ``new_centers[perm[j]]`` matched to old context ``j``;
    so ``new_centers[perm]`` is aligned with ``old_centers`` and a new label ``l`` becomes
    ``argsort(perm)[l]``. This is how a context keeps its identity across CGPFL rounds.
    """
    old, new = _np(old_centers), _np(new_centers)
    if old.ndim != 2 or old.shape != new.shape:
        raise ValueError(f"old and new centers must have the same shape [k, d], got "
                         f"{old.shape} and {new.shape}")
    if not (np.all(np.isfinite(old)) and np.all(np.isfinite(new))):
        raise ValueError("centers contain NaN or inf")
    # [k, k] squared distances in row blocks of <= _BLOCK differences (numpy sums each
    # contiguous row alone, so the same bits as the one-shot ``((old - new) ** 2).sum(-1)``)
    k, d = old.shape
    cost = np.empty((k, k))
    rows = max(1, _BLOCK // (k * d))
    for a in range(0, k, rows):
        t = old[a:a + rows, None, :] - new[None, :, :]
        np.multiply(t, t, out=t)
        cost[a:a + rows] = t.sum(-1)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(old.shape[0], dtype=np.int64)
    perm[rows] = cols
    return perm


def align_result(result: KMeansResult, old_centers: Any) -> KMeansResult:
    """``result`` relabelled so that cluster ``j`` is the one matched to ``old_centers[j]``."""
    perm = match_clusters(old_centers, result.centers)
    inv = np.argsort(perm)
    if isinstance(result.labels, torch.Tensor):
        inv_t = torch.as_tensor(inv, device=result.labels.device)
        perm_t = torch.as_tensor(perm, device=result.centers.device)
        return replace(result, labels=inv_t[result.labels], centers=result.centers[perm_t])
    return replace(result, labels=inv[result.labels], centers=result.centers[perm])


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
