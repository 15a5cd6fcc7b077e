"""Low-rank reduction of personalized layers (PPFE §4.3 / App. A.1; docs/formulas.md §C.2).

W = U Σ Vᵀ, keep the top r singular triplets: W_r = U_r Σ_r V_rᵀ.  A d_l × d_{l−1} layer
then costs r (d_l + d_{l−1}) parameters instead of d_l d_{l−1} (factor
d_l d_{l−1} / (r (d_l + d_{l−1}))), and ‖W − W_r‖_F² = Σ_{k>r} σ_k² (Eckart–Young).
[SEED prose, standard math.]  Works on numpy arrays and on torch tensors (device/dtype kept);
batched over leading dimensions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pfl_theory.validation import positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["low_rank_param_count", "low_rank_reduction_factor", "truncated_svd"]


def low_rank_param_count(d_out: int, d_in: int, rank: int) -> int:
    """r (d_out + d_in): parameters of the factors U_r Σ_r (d_out × r) and V_rᵀ (r × d_in)."""
    a, b = positive_int("d_out", d_out), positive_int("d_in", d_in)
    r = positive_int("rank", rank)
    if r > min(a, b):
        raise ValueError(f"rank must be <= min(d_out, d_in) = {min(a, b)}, got {r}")
    return r * (a + b)


def low_rank_reduction_factor(d_out: int, d_in: int, rank: int) -> float:
    """d_out d_in / (r (d_out + d_in)) (> 1 means fewer parameters than the dense layer)."""
    return d_out * d_in / low_rank_param_count(d_out, d_in, rank)


def truncated_svd(weight: Any, rank: int) -> tuple[Any, Any]:
    """Best rank-r approximation W_r of ``weight [..., d_out, d_in]`` and the squared
    Frobenius error ‖W − W_r‖_F² = Σ_{k>r} σ_k² (per leading index).  numpy in → numpy out;
    torch in → torch out on the same device/dtype."""
    r = positive_int("rank", rank)
    try:
        import torch
        is_torch = isinstance(weight, torch.Tensor)
    except ImportError:  # pragma: no cover
        is_torch = False
    if weight.ndim < 2:
        raise ValueError(f"weight must have at least 2 dimensions, got shape {tuple(weight.shape)}")
    if r > min(weight.shape[-2:]):
        raise ValueError(f"rank must be <= {min(weight.shape[-2:])}, got {r}")
    if is_torch:
        u, s, vh = torch.linalg.svd(weight, full_matrices=False)
        w_r = (u[..., :, :r] * s[..., None, :r]) @ vh[..., :r, :]
        return w_r, (s[..., r:] ** 2).sum(dim=-1)
    w = np.asarray(weight, dtype=np.float64)
    u, s, vh = np.linalg.svd(w, full_matrices=False)
    w_r = (u[..., :, :r] * s[..., None, :r]) @ vh[..., :r, :]
    return w_r, (s[..., r:] ** 2).sum(axis=-1)


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
