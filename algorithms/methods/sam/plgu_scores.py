"""PLGU layer personalization scores ξ (eqs. 6 and 10) and top-D layer selection.

Paper: Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?* (CVPR 2023) — "PLGU".  Spec: docs/formulas.md §D.4 (scores), §D.5 step 2 (top-D),
checks §E.D4.

Formula (eq. 6, PLGU-LF; eq. 10, PLGU-GRep is the same with θ → φ_i, w → φ restricted to the
representation layers)::

    ξ_{i,l} = ‖θ̃_{i,l} − w̃_l‖_2 / dim(w̃_l)

where θ̃_{i,l} is client i's personalized layer l (all parameter tensors of the layer group,
flattened together), w̃_l the global layer l and dim(·) its number of parameters.

Normalisation (ERRATUM?/implementation choice, docs/formulas.md §D.4): the paper claims the division
by dim gives Σ_l ξ_{i,l} = 1, which it does not; we normalise ξ_{i,l} ← ξ_{i,l}/Σ_l' ξ_{i,l'}
(``normalize=True``, default).  Edge case: when client i's personalized model equals the
global model, every raw ξ_{i,l} is 0 and the sum is 0.  Following §E.D4 ("ξ = 0 when
personalized = global") the default ``on_zero="zeros"`` keeps ξ_i = 0 — with LWSAM this
means *no perturbation* for that client (e.g. PLGU-LF's first round, when θ̃ starts at w̃).
``on_zero="uniform"`` gives ξ_i = 1/L instead (plain SAM scaled by 1/L).

Top-D selection (Algorithm 2, step 2): the D layers with the largest ξ_{i,l} are the
personalized layers L_Per, the rest universal L_Uni.  Ties are broken deterministically in
favour of the *lower layer index* (stable sort), so the result depends only on the values.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from pfl_theory.validation import NonFiniteValueError, positive_int

ZERO_POLICIES = ("zeros", "uniform")


def _layer_diff_norms(personalized: Mapping[str, torch.Tensor],
                      global_: Mapping[str, torch.Tensor],
                      layers: Sequence[Sequence[str]]) -> tuple[torch.Tensor, list[int]]:
    """Per-client, per-layer ‖θ_{i,l} − w_l‖_2 as [N, L] and the layer sizes dim(w_l)."""
    if len(layers) == 0:
        raise ValueError("layers must contain at least one group")
    seen: set[str] = set()
    norms, dims = [], []
    n = None
    for l, group in enumerate(layers):
        if len(group) == 0:
            raise ValueError(f"layer {l} has no parameters")
        sq, dim = 0.0, 0
        for name in group:
            if name in seen:
                raise ValueError(f"parameter {name!r} appears in two layers")
            seen.add(name)
            if name not in personalized or name not in global_:
                raise ValueError(f"parameter {name!r} missing from personalized or global dict")
            th, w = personalized[name], torch.as_tensor(global_[name])
            if th.dim() == 0:
                raise ValueError(f"{name!r}: personalized tensors need a client dimension [N, ...]")
            if n is None:
                n = th.shape[0]
            elif th.shape[0] != n:
                raise ValueError("all personalized tensors need the same leading client dimension")
            if w.shape == th.shape:  # per-client global copies [N, ...]
                diff = th - w
            elif w.shape == th.shape[1:]:  # one shared global model [...]
                diff = th - w.unsqueeze(0)
            else:
                raise ValueError(f"{name!r}: global shape {tuple(w.shape)} matches neither "
                                 f"{tuple(th.shape)} nor {tuple(th.shape[1:])}")
            sq = sq + diff.pow(2).flatten(1).sum(1)
            dim += th[0].numel()
        norms.append(torch.as_tensor(sq).sqrt())
        dims.append(dim)
    out = torch.stack(norms, dim=1)
    if not torch.isfinite(out).all():
        raise NonFiniteValueError("parameters contain NaN or inf")
    return out, dims


def personalization_scores(personalized: Mapping[str, torch.Tensor],
                           global_: Mapping[str, torch.Tensor],
                           layers: Sequence[Sequence[str]], *, normalize: bool = True,
                           on_zero: str = "zeros") -> torch.Tensor:
    """Scores ξ of shape [N, L] (eq. 6 / eq. 10), optionally normalised to sum 1 per client.

    Symbols → arguments: θ̃_i = ``personalized`` (dict of [N, ...]); w̃ = ``global_`` (dict of
    [...] shared by all clients, or [N, ...] per-client copies); the L layers = ``layers``.
    For eq. 10 pass only the representation parameters and their layer groups.
    ``on_zero`` decides a client whose raw scores are all 0 (see module docstring).
    """
    if on_zero not in ZERO_POLICIES:
        raise ValueError(f"on_zero must be one of {ZERO_POLICIES}, got {on_zero!r}")
    norms, dims = _layer_diff_norms(personalized, global_, layers)
    xi = norms / torch.tensor(dims, dtype=norms.dtype, device=norms.device)
    if not normalize:
        return xi
    total = xi.sum(dim=1, keepdim=True)
    zero = total == 0
    normed = xi / torch.where(zero, torch.ones_like(total), total)
    if on_zero == "uniform":
        normed = torch.where(zero, torch.full_like(xi, 1.0 / xi.shape[1]), normed)
    return normed


def top_layers(xi: torch.Tensor, D: int) -> torch.Tensor:
    """Boolean mask [N, L]: True for each client's D layers of largest ξ (L_Per).

    Deterministic tie-break: among equal scores the lower layer index is chosen first.
    ``D = 0`` selects nothing, ``D = L`` everything.
    """
    xi = torch.as_tensor(xi)
    if xi.dim() != 2:
        raise ValueError(f"xi must have shape [N, L], got {tuple(xi.shape)}")
    if not torch.isfinite(xi).all():
        raise NonFiniteValueError("xi contains NaN or inf")
    D = positive_int("D", D, minimum=0)
    if D > xi.shape[1]:
        raise ValueError(f"D must be <= L = {xi.shape[1]}, got {D}")
    order = torch.sort(xi, dim=1, descending=True, stable=True).indices
    mask = torch.zeros(xi.shape, dtype=torch.bool, device=xi.device)
    mask.scatter_(1, order[:, :D], True)
    return mask
