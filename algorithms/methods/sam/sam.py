"""SAM and layer-wise SAM (LWSAM) perturbations for batched parameters.

Paper: Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?* (CVPR 2023) — "PLGU"; SAM itself: Foret et al., *Sharpness-Aware Minimization
for Efficiently Improving Generalization* (ICLR 2021, arXiv 2010.01412).
Spec: docs/formulas.md §D.2 (eqs. 2–5), checks §E.D1–D3.

Batched convention: a model's parameters are a dict ``{name: Tensor[N, ...]}`` (leading
dimension = client); *layers* are an ordered list of groups of parameter names, e.g.
``[["fc1.weight", "fc1.bias"], ["fc2.weight", "fc2.bias"]]``.  Every norm below is taken
per client over all parameters of the dict (the client's whole flattened parameter vector).

Formula (eq. 5, first-order solution of the LWSAM inner maximisation (eq. 4)), with
``g = ∇_θ F_{D_i}(θ_i)`` (one client), ``1/p + 1/q = 1`` and ``Λ_i = diag(ξ_{i,1..L})``
(ξ_{i,l} multiplies every coordinate of layer l)::

    corrected (default):  ε̃ = ρ · Λ_i · sign(g) |g|^{q-1} / (‖g‖_q^q)^{1/p}
    as printed:           ε̃ = ρ · Λ_i · sign(g) |g|^{q-1} / (‖g‖_q^q)^{p-1}

ERRATUM (docs/formulas.md §D.2): the paper prints the exponent ``p-1``; the SAM paper's general-p
solution has ``1/p``, the only version that gives ‖ε̃‖_p = ρ (Λ = I) and reduces to eq. (3)
``ρ g/‖g‖_2`` at p = 2.  ``exponent="corrected"`` (default) implements ``1/p``;
``exponent="printed"`` implements the paper's text so the erratum can be tested (at p = 2 it
gives ``ρ g/‖g‖_2²``, whose norm ρ/‖g‖_2 is not ρ).  p = ∞ (q = 1) gives ``ρ sign(g)``;
the printed form is undefined there (exponent ∞) and raises.  p = 1 (q = ∞) is excluded.

Conventions chosen here (not specified by the paper):
* a client whose gradient is exactly zero gets a zero perturbation (the direction is
  undefined; this keeps ρ = 0 / converged clients at plain SGD);
* Λ is applied after the normalisation computed on the *unscaled* gradient, exactly as in
  eq. (5): per-layer norm (p = 2) = ρ ξ_l ‖g_l‖_2/‖g‖_2, and layers with ξ_l = 0 are not
  perturbed.  (Read literally, eq. (4) with invertible Λ is plain SAM; the layer-wise effect
  comes only from eq. (5)'s heuristic scaling — docs/formulas.md §D.2.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from pfl_theory.validation import nonnegative

Params = dict[str, torch.Tensor]
GradFn = Callable[[Params], Mapping[str, torch.Tensor]]
EXPONENTS = ("corrected", "printed")


def _check_p(p: float) -> float:
    p = float(p)
    if math.isnan(p) or p <= 1.0:
        raise ValueError(f"p must lie in (1, inf], got {p!r}")
    return p


def dual_exponent(p: float) -> float:
    """q with 1/p + 1/q = 1 for p in (1, ∞] (q = 1 at p = ∞)."""
    p = _check_p(p)
    return 1.0 if math.isinf(p) else p / (p - 1.0)


def _batch_size(tensors: Mapping[str, torch.Tensor]) -> int:
    if not tensors:
        raise ValueError("empty parameter/gradient dict")
    sizes = {t.shape[0] if t.dim() > 0 else None for t in tensors.values()}
    if None in sizes or len(sizes) != 1:
        raise ValueError("every tensor needs the same leading client dimension [N, ...]; "
                         f"got shapes {[tuple(t.shape) for t in tensors.values()]}")
    return sizes.pop()


def _expand(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-client vector [N] -> broadcastable against ``like`` [N, ...]."""
    return v.reshape((-1,) + (1,) * (like.dim() - 1))


def _layer_scale(grads: Mapping[str, torch.Tensor], xi, layers) -> dict[str, torch.Tensor]:
    """Map every parameter name to its column ξ[:, l] (validated)."""
    if layers is None:
        raise ValueError("xi needs `layers` (ordered list of groups of parameter names)")
    n = _batch_size(grads)
    ref = next(iter(grads.values()))
    xi = torch.as_tensor(xi, dtype=ref.dtype, device=ref.device)
    if xi.shape != (n, len(layers)):
        raise ValueError(f"xi must have shape [N, L] = [{n}, {len(layers)}], got {tuple(xi.shape)}")
    if not torch.isfinite(xi).all() or (xi < 0).any():
        raise ValueError("xi must be finite and >= 0")
    owner: dict[str, int] = {}
    for l, group in enumerate(layers):
        for name in group:
            if name in owner:
                raise ValueError(f"parameter {name!r} appears in two layers")
            owner[name] = l
    if set(owner) != set(grads):
        raise ValueError(f"layers must cover exactly the parameters {sorted(grads)}; "
                         f"got {sorted(owner)}")
    return {name: xi[:, owner[name]] for name in grads}


def perturbation(grads: Mapping[str, torch.Tensor], *, rho: float, p: float = 2.0,
                 xi=None, layers: Sequence[Sequence[str]] | None = None,
                 exponent: str = "corrected") -> Params:
    """SAM (eq. 3) / LWSAM (eq. 5) perturbation ε̃ for every client at once.

    Symbols → arguments: ``g`` = ``grads`` (dict of [N, ...]); ρ = ``rho``; p = ``p`` (q its
    dual); Λ_i = diag(``xi[i]``) with ``xi`` of shape [N, L] and ``layers`` the L groups of
    parameter names (``xi=None`` means Λ = I, plain SAM).  ``exponent`` selects the
    denominator exponent: ``"corrected"`` = 1/p (default), ``"printed"`` = p − 1.
    Returns a dict like ``grads``.  Zero-gradient clients get ε̃ = 0.
    """
    rho = nonnegative("rho", rho)
    q = dual_exponent(p)
    p = float(p)
    if exponent not in EXPONENTS:
        raise ValueError(f"exponent must be one of {EXPONENTS}, got {exponent!r}")
    if exponent == "printed" and math.isinf(p):
        raise ValueError("the printed exponent p-1 is undefined at p = inf")
    _batch_size(grads)
    scale = _layer_scale(grads, xi, layers) if xi is not None else None
    # Scale-free evaluation: g = s·u with s = max|g| per client, so |u| <= 1 and no overflow.
    s = torch.stack([g.detach().abs().flatten(1).amax(1) for g in grads.values()]).amax(0)
    safe_s = torch.where(s > 0, s, torch.ones_like(s))
    units = {k: g / _expand(safe_s, g) for k, g in grads.items()}
    # numerator sign(u)|u|^{q-1}; sum_q = ‖u‖_q^q (|u|^0 := 1 where u ≠ 0, sign kills u = 0)
    numer = {k: torch.sign(u) * u.abs().pow(q - 1.0) for k, u in units.items()}
    sum_q = sum(u.abs().pow(q).flatten(1).sum(1) for u in units.values())
    safe_sum = torch.where(sum_q > 0, sum_q, torch.ones_like(sum_q))
    if exponent == "corrected":  # homogeneous of degree 0 in g: s cancels exactly
        factor = rho / safe_sum.pow(1.0 / p)
    else:  # printed: s^{(q-1) - q(p-1)} survives
        factor = rho / safe_sum.pow(p - 1.0) * safe_s.pow((q - 1.0) - q * (p - 1.0))
    factor = torch.where(s > 0, factor, torch.zeros_like(factor))
    out = {}
    for k, num in numer.items():
        eps = num * _expand(factor, num)
        if scale is not None:
            eps = eps * _expand(scale[k], num)
        out[k] = eps
    return out


def perturbed_params(params: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor],
                     *, rho: float, p: float = 2.0, xi=None,
                     layers: Sequence[Sequence[str]] | None = None,
                     exponent: str = "corrected") -> Params:
    """The perturbed point θ + ε̃ (eq. 3 / eq. 5), ε̃ from ``grads`` taken at ``params``."""
    if set(params) != set(grads):
        raise ValueError(f"params and grads need the same keys: {sorted(params)} vs {sorted(grads)}")
    eps = perturbation(grads, rho=rho, p=p, xi=xi, layers=layers, exponent=exponent)
    return {k: params[k] + eps[k] for k in params}


@dataclass(frozen=True)
class SAMGradient:
    """What one SAM evaluation produced: the plain gradient at θ, the perturbation ε̃ and the
    SAM gradient ∇F(θ + ε̃) (all dicts of [N, ...])."""

    grad: Params
    perturbation: Params
    sam_grad: Params


def sam_gradient(params: Mapping[str, torch.Tensor], grad_fn: GradFn, *, rho: float,
                 p: float = 2.0, xi=None, layers: Sequence[Sequence[str]] | None = None,
                 exponent: str = "corrected",
                 grad: Mapping[str, torch.Tensor] | None = None) -> SAMGradient:
    """SAM/LWSAM gradient ``∇F(θ)|_{θ+ε̃}`` (eq. 3 and the text after it).

    ``grad_fn(params) -> {name: grad [N, ...]}`` must return every client's gradient of its
    own loss (one batched call).  Pass ``grad`` to reuse an already computed gradient at
    ``params`` (then ``grad_fn`` is called once, at the perturbed point).
    """
    g = dict(grad_fn(dict(params))) if grad is None else dict(grad)
    pert = perturbation(g, rho=rho, p=p, xi=xi, layers=layers, exponent=exponent)
    if set(pert) != set(params):
        raise ValueError("grad_fn must return a gradient for every parameter")
    sam_g = dict(grad_fn({k: params[k] + pert[k] for k in params}))
    return SAMGradient(grad=g, perturbation=pert, sam_grad=sam_g)


def sam_step(params: Mapping[str, torch.Tensor], grad_fn: GradFn, *, rho: float, lr: float,
             xi=None, p: float = 2.0, layers: Sequence[Sequence[str]] | None = None,
             exponent: str = "corrected") -> Params:
    """One SAM (``xi=None``) or LWSAM step for all clients: θ ← θ − lr · ∇F(θ + ε̃).

    ρ = 0 gives ε̃ = 0, i.e. exactly one plain SGD step θ − lr ∇F(θ) (§E.D5 reduction).
    """
    lr = nonnegative("lr", lr)
    res = sam_gradient(params, grad_fn, rho=rho, p=p, xi=xi, layers=layers, exponent=exponent)
    return {k: params[k] - lr * res.sam_grad[k] for k in params}
