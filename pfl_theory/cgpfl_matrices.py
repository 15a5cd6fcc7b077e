"""CGPFL clustering matrices P^t, J^t, Q^t and the updates built from them.

Paper: Tang, Guo, Guo, *Personalized Federated Learning with Contextualized Generalization*
(IJCAI 2022, arXiv 2106.13044), eq. (3), eq. (4), Algorithm 1; ICLR-2022 version eq. (6),
(16), (19).  Spec: docs/formulas.md §A.3–§A.5.

Orientation.  The paper stacks models as *columns* (Θ, Ω_{I,R} ∈ R^{d×N}, Ω_K ∈ R^{d×K}).
The matrices returned here are exactly the paper's (P: N×K, J: K×N, Q: K×K), so in the
paper's orientation ``Omega_IR @ P`` is d×K.  With the row-major arrays used elsewhere in
this toolkit (``uploads`` [N, d], ``omega`` [K, d]) the same products are
``P.T @ uploads`` ([K, d]) and ``J.T @ omega`` ([N, d]).

Builders accept numpy or torch labels and return the same kind (torch: float64 unless a
dtype is given, on the labels' device).  Every cluster must be non-empty (else a column of
P would be zero and the paper's column-stochasticity fails): ValueError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pfl_theory.validation import in_range, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["assignment_matrix", "indicator_matrix", "transition_matrix",
           "global_aggregation", "zero_cross_term"]


def _check_labels(labels: Any, k: int, *, allow_empty: bool = False) -> tuple[np.ndarray, Any]:
    k = positive_int("k", k)
    if isinstance(labels, torch.Tensor):
        lab, like = labels.detach().cpu().numpy(), labels
    else:
        lab, like = np.asarray(labels), None
    if lab.ndim != 1 or lab.size < 1 or not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D integer array, got shape "
                         f"{lab.shape} and dtype {lab.dtype}")
    if lab.min() < 0 or lab.max() >= k:
        raise ValueError(f"labels must lie in [0, {k}), got range [{lab.min()}, {lab.max()}]")
    if k > lab.size:
        raise ValueError(f"K must be <= N = {lab.size}, got K={k}")
    if not allow_empty:
        empty = np.setdiff1d(np.arange(k), lab)
        if empty.size:
            raise ValueError(f"clusters {empty.tolist()} are empty; P^t needs every cluster "
                             "non-empty (column sums 1)")
    return lab.astype(np.int64), like


def _out(mat: np.ndarray, like: Any, dtype: Any) -> Any:
    if like is None:
        return mat if dtype is None else mat.astype(dtype)
    return torch.as_tensor(mat, dtype=dtype or torch.float64, device=like.device)


def assignment_matrix(labels: Any, k: int, *, dtype: Any = None) -> Any:
    """P^t ∈ R^{N×K}, eq. (3): ``P[i, j] = 1/|C_j|`` if client i ∈ C_j, else 0.

    Column sums are 1 (column-stochastic); each row has one non-zero ``1/|C_{k(i)}|``.
    ``labels[i]`` = cluster k(i) of client i (0-based).
    """
    lab, like = _check_labels(labels, k)
    sizes = np.bincount(lab, minlength=k).astype(np.float64)
    p = np.zeros((lab.size, k))
    p[np.arange(lab.size), lab] = 1.0 / sizes[lab]
    return _out(p, like, dtype)


def indicator_matrix(labels: Any, k: int, *, dtype: Any = None) -> Any:
    """J^t ∈ R^{K×N}: ``J[k, i] = 1[i ∈ C_k]`` (the [DERIVED] choice of §A.3), so that
    J^t P^t = I_K and the broadcast Ω_K J^t gives client i the model ω_{k(i)}."""
    lab, like = _check_labels(labels, k)
    j = np.zeros((k, lab.size))
    j[lab, np.arange(lab.size)] = 1.0
    return _out(j, like, dtype)


def transition_matrix(labels_old: Any, labels_new: Any, k: int, *, dtype: Any = None) -> Any:
    """Q^t := J^t P^{t+1} ∈ R^{K×K} (§A.3 [DERIVED]):
    ``Q[k, k'] = |C^t_k ∩ C^{t+1}_{k'}| / |C^{t+1}_{k'}|``.

    Always column-stochastic; equals I_K when the clustering is unchanged.  The paper's
    eq. (3) asks Q to be doubly stochastic and P^{t+1} = P^t Q^t; both hold only in special
    cases (docs/formulas.md §A.11 ERRATUM?), which is why this is a diagnostic, not an identity.
    """
    lab_old, like = _check_labels(labels_old, k)
    lab_new, _ = _check_labels(labels_new, k)
    if lab_old.shape != lab_new.shape:
        raise ValueError(f"labels_old and labels_new must have the same length, got "
                         f"{lab_old.size} and {lab_new.size}")
    q = indicator_matrix(lab_old, k) @ assignment_matrix(lab_new, k)
    return _out(q, like, dtype)


def global_aggregation(omega: Any, uploads: Any, p_next: Any, *, alpha: float) -> Any:
    """Global update, Algorithm 1 step 4 / ICLR eq. (6), row-major:

        Ω^{t+1}_K = Ω^t_K − α (Ω^t_K − Ω^t_{I,R} P^{t+1})
        ⇔ ω^{t+1}_k = (1−α) ω^t_k + α · mean_{i ∈ C^{t+1}_k} ω̃^t_{i,R}.

    Args: ``omega`` [K, d] (rows ω_k), ``uploads`` [N, d] (rows ω̃_{i,R}), ``p_next`` the
    N×K matrix P^{t+1}; ``alpha`` ∈ [0, 1] (Theorem 4.1 needs α ≤ 1).  numpy or torch.
    """
    alpha = in_range("alpha", alpha, 0.0, 1.0)
    if omega.ndim != 2 or uploads.ndim != 2 or p_next.shape != (uploads.shape[0], omega.shape[0]):
        raise ValueError(f"shapes must be omega [K, d], uploads [N, d], p_next [N, K]; got "
                         f"{tuple(omega.shape)}, {tuple(uploads.shape)}, {tuple(p_next.shape)}")
    return omega - alpha * (omega - p_next.T @ uploads)


def zero_cross_term(v: Any, q: Any) -> float:
    """ICLR eq. (19): Σ_k [v (Q − I_K)]_k = Σ_j v_j (Σ_k Q_{j,k} − 1), which is 0 for any row
    vector v when Q is row-stochastic.  Returns the left-hand side (for checks)."""
    v = np.asarray(v, dtype=np.float64).reshape(1, -1)
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (v.shape[1], v.shape[1]):
        raise ValueError(f"q must be [K, K] with K = len(v) = {v.shape[1]}, got {q.shape}")
    return float((v @ (q - np.eye(q.shape[0]))).sum())


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
