"""Moreau envelopes and proximal operators — the inner level of pFedMe.

Paper: C. T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with Moreau
Envelopes*, NeurIPS 2020 (arXiv 2006.08848); docs/formulas.md §B.1, §B.3.

For a client loss f and a regularisation λ > 0 (eq. 3 and the bi-level problem of §B.1):

    θ̂(w) = prox_{f/λ}(w) = argmin_θ { f(θ) + λ/2 ‖θ − w‖² }            (eq. 3)
    F(w)  = min_θ  { f(θ) + λ/2 ‖θ − w‖² }                              (Moreau envelope)
    ∇F(w) = λ (w − θ̂(w))                                                (eq. 6, Prop. 1)

Two ways to compute them:

* quadratics f(θ) = ½ θᵀAθ − bᵀθ in closed form, θ̂(w) = (A + λI)⁻¹(b + λw)
  (docs/formulas.md §B.3 [DERIVED]); batched over any leading dimensions; numpy float64 arrays or
  torch tensors (then dtype/device follow the inputs and autograd flows through);
* a general differentiable f given as a torch callable, by an iterative solver
  (:func:`prox`), batched over clients along the leading dimension.

Proposition 1 constants (L_F = λ, μ_F = λμ/(λ+μ)) are in :func:`moreau_constants`; the
λ > 2L requirement for non-convex f raises ``ValueError`` (a bound with a violated
hypothesis is not a number one should use silently).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from pfl_theory.validation import NonFiniteValueError, nonnegative, positive, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = [
    "Envelope", "MoreauConstants", "quadratic_value", "quadratic_prox",
    "quadratic_envelope", "envelope_hessian_quadratic", "prox", "moreau_constants",
]


@dataclass(frozen=True)
class Envelope:
    """Result of a prox computation, for inputs w of shape ``[..., d]``.

    ``theta_hat`` = θ̂(w) ``[..., d]``; ``value`` = F(w) ``[...]``; ``grad`` = ∇F(w) =
    λ(w − θ̂(w)) ``[..., d]`` (eq. 6).  Iterative solves also report the final squared
    inner-gradient norm ‖∇h(θ̂)‖² per client, the iteration count and convergence."""

    theta_hat: Any
    value: Any
    grad: Any
    grad_norm_sq: Any = None
    iterations: int = 0
    converged: bool = True


@dataclass(frozen=True)
class MoreauConstants:
    """Proposition 1 constants: smoothness L_F, strong convexity μ_F, κ_F = L_F/μ_F."""

    L_F: float
    mu_F: float
    kappa_F: float


# ----------------------------------------------------------------------------- quadratics
def _as_backend(*xs: Any) -> tuple[list[Any], bool]:
    """Convert to torch tensors if any input is a tensor (dtype/device of the first
    tensor), else to float64 numpy arrays."""
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    if tensors:
        ref = tensors[0]
        out = [torch.as_tensor(x, dtype=ref.dtype, device=ref.device) for x in xs]
        finite = [bool(torch.isfinite(x.detach()).all()) for x in out]
    else:
        out = [np.asarray(x, dtype=np.float64) for x in xs]
        finite = [bool(np.isfinite(x).all()) for x in out]
    if not all(finite):
        raise NonFiniteValueError("inputs contain NaN or inf")
    return out, bool(tensors)


def _check_A(A: Any, is_torch: bool, lam: float) -> None:
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must have shape [..., d, d], got {tuple(A.shape)}")
    Ad = A.detach().cpu().numpy() if is_torch else A
    if np.abs(Ad - Ad.swapaxes(-1, -2)).max() > 1e-10 * (1.0 + np.abs(Ad).max()):
        raise ValueError("A must be symmetric")  # round-off level asymmetry is tolerated
    lo = float(np.linalg.eigvalsh(Ad).min())
    if lo + lam <= 0:
        raise ValueError(f"the prox needs A + lam*I positive definite: lam={lam} <= "
                         f"-lambda_min(A)={-lo:.6g} (choose lam > L for non-convex f)")


def _solve(M: Any, rhs: Any, is_torch: bool) -> Any:
    if is_torch:
        return torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1)
    return np.linalg.solve(M, rhs[..., None])[..., 0]


def _eye(d: int, like: Any, is_torch: bool) -> Any:
    if is_torch:
        return torch.eye(d, dtype=like.dtype, device=like.device)
    return np.eye(d)


def quadratic_value(A: Any, b: Any, theta: Any) -> Any:
    """f(θ) = ½ θᵀAθ − bᵀθ, batched over leading dimensions (docs/formulas.md §B.3 [DERIVED]).

    A: ``[..., d, d]`` symmetric; b, theta: ``[..., d]``. Returns ``[...]``."""
    (A, b, theta), is_torch = _as_backend(A, b, theta)
    quad = (theta[..., None, :] @ A @ theta[..., :, None])[..., 0, 0]
    return 0.5 * quad - (b * theta).sum(-1)


def quadratic_prox(A: Any, b: Any, w: Any, *, lam: float) -> Any:
    """θ̂(w) = prox_{f/λ}(w) = (A + λI)⁻¹(b + λw) for f(θ) = ½θᵀAθ − bᵀθ.

    Reference: pFedMe eq. (3); closed form docs/formulas.md §B.3 [DERIVED].
    Symbols: A → ``A`` [..., d, d] (symmetric), b → ``b`` [..., d], w → ``w`` [..., d],
    λ → ``lam``. Assumption: A + λI ≻ 0 (always for convex f; λ > L for non-convex f with
    eigenvalues of A ≥ −L), otherwise ``ValueError``."""
    lam = positive("lam", lam)
    (A, b, w), is_torch = _as_backend(A, b, w)
    _check_A(A, is_torch, lam)
    return _solve(A + lam * _eye(A.shape[-1], A, is_torch), b + lam * w, is_torch)


def quadratic_envelope(A: Any, b: Any, w: Any, *, lam: float) -> Envelope:
    """θ̂(w), F(w) and ∇F(w) = λ(w − θ̂(w)) for a quadratic f, in closed form.

    Reference: pFedMe §3.1 (Moreau envelope F_i), eq. (3), eq. (6); docs/formulas.md §B.1, §B.3.
    F(w) = f(θ̂) + λ/2 ‖θ̂ − w‖² with f(θ) = ½θᵀAθ − bᵀθ. Same symbols/assumptions as
    :func:`quadratic_prox`. With torch inputs requiring grad, autograd flows through."""
    theta = quadratic_prox(A, b, w, lam=lam)
    (A, b, w), _ = _as_backend(A, b, w)
    value = quadratic_value(A, b, theta) + 0.5 * lam * ((theta - w) ** 2).sum(-1)
    return Envelope(theta_hat=theta, value=value, grad=lam * (w - theta))


def envelope_hessian_quadratic(A: Any, *, lam: float) -> Any:
    """∇²F = λA(A + λI)⁻¹ for a quadratic f (docs/formulas.md §B.3 [DERIVED]).

    Its eigenvalues are λa/(λ + a) for the eigenvalues a of A: they lie in
    [λμ/(λ+μ), λL/(λ+L)] for μI ⪯ A ⪯ LI, which is Proposition 1 of pFedMe
    (μ_F = λμ/(λ+μ), L_F = λ). Requires A + λI ≻ 0."""
    lam = positive("lam", lam)
    (A,), is_torch = _as_backend(A)
    _check_A(A, is_torch, lam)
    M = A + lam * _eye(A.shape[-1], A, is_torch)
    inv_M_A = (torch.linalg.solve(M, A) if is_torch else np.linalg.solve(M, A))
    H = lam * inv_M_A  # (A+λI)⁻¹A = A(A+λI)⁻¹ since they commute
    return 0.5 * (H + H.swapaxes(-1, -2))


# ------------------------------------------------------------------------ iterative prox
def prox(
    f: Callable[[torch.Tensor], torch.Tensor], w: torch.Tensor, *, lam: float,
    tol: float = 1e-18, method: str = "lbfgs", step: float | None = None,
    max_iter: int = 20_000, theta0: torch.Tensor | None = None,
) -> Envelope:
    """Iterative prox_{f/λ}(w), Moreau envelope F(w) and ∇F(w) = λ(w − θ̂(w)).

    Reference: pFedMe eq. (3), eq. (6), the stopping rule of eq. (8); docs/formulas.md §B.1, §B.4.
    Minimises h(θ) = f(θ) + λ/2 ‖θ − w‖² until ‖∇h(θ)‖² ≤ ``tol`` for every client.

    Symbols: f → ``f``, a torch callable mapping θ of shape ``[N, d]`` to the per-client
    losses ``[N]`` (client i's loss may depend only on row i — the clients are solved
    jointly as one separable problem); w → ``w`` (``[N, d]``, or ``[d]`` with f mapping
    ``[d]`` to a scalar); λ → ``lam``; ν → ``tol``.

    Methods: ``"lbfgs"`` (torch L-BFGS with strong-Wolfe line search on Σᵢ hᵢ; the default)
    or ``"gd"`` (gradient descent with fixed ``step``; a client stops at the first iterate
    with ‖∇hᵢ‖² ≤ tol, exactly as eq. (8) prescribes — use this for Lemma 1 experiments).
    Assumption: h strongly convex (f convex, or L-smooth with λ > L). Warns
    (``RuntimeWarning``) and reports ``converged=False`` if ``max_iter`` is reached or
    L-BFGS stalls: its line search compares loss values, so for O(1) losses it cannot go
    much below ‖∇h‖² ≈ 1e-22 in float64 (use ``"gd"`` with a known step to go further).
    dtype/device follow ``w``; use float64 for checks against theory."""
    lam = positive("lam", lam)
    tol = positive("tol", tol)
    max_iter = positive_int("max_iter", max_iter)
    if method not in ("lbfgs", "gd"):
        raise ValueError(f"method must be 'lbfgs' or 'gd', got {method!r}")
    if method == "gd" and step is None:
        raise ValueError("method='gd' needs a step (e.g. 1/(L + lam))")
    if not isinstance(w, torch.Tensor):
        raise ValueError("w must be a torch tensor (use quadratic_envelope for numpy)")
    if not torch.all(torch.isfinite(w)):
        raise NonFiniteValueError("w contains NaN or inf")
    single = w.ndim == 1
    if w.ndim not in (1, 2):
        raise ValueError(f"w must have shape [d] or [N, d], got {tuple(w.shape)}")
    fb = (lambda th: f(th[0]).reshape(1)) if single else f
    W = (w[None] if single else w).detach()
    theta = (W.clone() if theta0 is None else
             torch.as_tensor(theta0, dtype=W.dtype, device=W.device).reshape(W.shape).clone())

    def h(th: torch.Tensor) -> torch.Tensor:
        vals = fb(th)
        if vals.shape != th.shape[:1]:
            raise ValueError(f"f must return one loss per client, shape {tuple(th.shape[:1])}"
                             f", got {tuple(vals.shape)}")
        return vals + 0.5 * lam * ((th - W) ** 2).sum(-1)

    def grad_h(th: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            th = th.detach().requires_grad_(True)
            return torch.autograd.grad(h(th).sum(), th)[0]

    if method == "gd":
        theta, iters, gsq = _gd(grad_h, theta, positive("step", step), tol, max_iter)
    else:
        theta, iters, gsq = _lbfgs(h, grad_h, theta, tol, max_iter, lam)
    converged = bool((gsq <= tol).all())
    if not converged:
        warnings.warn(f"prox: max ||grad h||^2 = {float(gsq.max()):.3g} > tol = {tol:.3g} "
                      f"after {iters} iterations", RuntimeWarning, stacklevel=2)
    with torch.no_grad():
        value = h(theta)
    grad = lam * (W - theta)
    if single:
        theta, value, grad, gsq = theta[0], value[0], grad[0], gsq[0]
    return Envelope(theta, value, grad, gsq, iters, converged)


def _gd(grad_h, theta, step, tol, max_iter):
    for it in range(max_iter + 1):
        g = grad_h(theta)
        gsq = (g ** 2).sum(-1)
        active = gsq > tol
        if not bool(active.any()):
            return theta, it, gsq
        if it == max_iter:
            break
        theta = theta - step * g * active[:, None].to(g.dtype)
    return theta, max_iter, gsq


def _lbfgs(h, grad_h, theta, tol, max_iter, lam):
    theta = theta.detach().clone().requires_grad_(True)
    n_el = theta.numel()
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=50, history_size=20,
                            line_search_fn="strong_wolfe",
                            tolerance_grad=math.sqrt(tol / n_el) / 10, tolerance_change=0.0)

    def closure():
        opt.zero_grad()
        loss = h(theta).sum()
        loss.backward()
        return loss

    iters, stalls = 0, 0
    gsq = (grad_h(theta) ** 2).sum(-1)
    while iters < max_iter and bool((gsq > tol).any()):
        before = float(gsq.max())
        with torch.enable_grad():
            opt.step(closure)
        iters = int(opt.state[theta]["n_iter"])  # cumulative L-BFGS iterations
        gsq = (grad_h(theta) ** 2).sum(-1)
        stalls = stalls + 1 if float(gsq.max()) >= before else 0
        if stalls >= 3:  # no progress: the line search hit the loss round-off floor
            break
    theta = theta.detach()
    if bool((gsq > tol).any()) and iters < max_iter:
        theta, gsq, extra = _bb_polish(grad_h, theta, tol, max_iter - iters, lam)
        iters += extra
    return theta, iters, gsq.detach()


def _bb_polish(grad_h, theta, tol, max_iter, lam):
    """Gradient-only polishing after L-BFGS stalls: per-client Barzilai–Borwein steps
    α_i = s_iᵀs_i / s_iᵀy_i (no loss values needed, so no round-off floor from the line
    search); keeps each client's best iterate by ‖∇h_i‖²."""
    g = grad_h(theta)
    gsq = (g ** 2).sum(-1)
    best, best_gsq = theta.clone(), gsq.clone()
    alpha = torch.full_like(gsq, 0.1 / lam)  # safe first step: ∇²h ⪰ (λ − L)I, typically ≤ 2λ
    for it in range(1, min(max_iter, 1000) + 1):
        active = (best_gsq > tol)[:, None].to(g.dtype)
        if not bool(active.any()):
            return best, best_gsq, it - 1
        step = alpha[:, None] * g * active
        theta_new = theta - step
        g_new = grad_h(theta_new)
        s, y = -step, g_new - g
        sy = (s * y).sum(-1)
        alpha = torch.where(sy > 0, (s * s).sum(-1) / sy.clamp_min(1e-300), alpha)
        theta, g = theta_new, g_new
        gsq = (g ** 2).sum(-1)
        better = gsq < best_gsq
        best = torch.where(better[:, None], theta, best)
        best_gsq = torch.where(better, gsq, best_gsq)
    return best, best_gsq, min(max_iter, 1000)


# ------------------------------------------------------------------------ Proposition 1
def moreau_constants(*, lam: float, mu: float = 0.0, L: float | None = None,
                     convex: bool = True) -> MoreauConstants:
    """Proposition 1 of pFedMe (docs/formulas.md §B.3): smoothness and strong convexity of F_i.

    L_F = λ (for convex f, or for L-smooth non-convex f **with λ > 2L**);
    μ_F = λμ/(λ + μ) if f is μ-strongly convex (μ_F = 0 for μ = 0 or non-convex f);
    κ_F = L_F/μ_F (``inf`` when μ_F = 0).

    Symbols: λ → ``lam``, μ → ``mu``, L → ``L`` (gradient Lipschitz constant of f, needed
    only for non-convex f), ``convex`` selects the case. Raises ``ValueError`` when
    λ ≤ 2L for non-convex f (the proposition's hypothesis; choice documented in the module
    docstring), and when ``convex=False`` is combined with μ > 0."""
    lam = positive("lam", lam)
    mu = nonnegative("mu", mu)
    if not convex:
        if L is None:
            raise ValueError("non-convex f needs its smoothness constant L")
        L = nonnegative("L", L)
        if mu > 0:
            raise ValueError("mu > 0 means strongly convex f; pass convex=True")
        if lam <= 2 * L:
            raise ValueError(f"Proposition 1 (non-convex f) needs lam > 2L: lam={lam} <= "
                             f"2L={2 * L}")
    elif L is not None:
        nonnegative("L", L)
    if mu == 0:
        return MoreauConstants(L_F=lam, mu_F=0.0, kappa_F=math.inf)
    # λμ/(λ + μ) and κ_F = 1 + λ/μ in forms whose intermediates never overflow (λ, μ up to
    # 1e308 or down to 1e-308); a result outside float64 is an error, not inf/0
    mu_F = mu / (1.0 + mu / lam) if mu <= lam else lam / (1.0 + lam / mu)
    kappa_F = 1.0 + lam / mu
    if mu_F == 0 or not math.isfinite(kappa_F):
        raise ValueError(f"mu_F = lam*mu/(lam+mu) or kappa_F = 1 + lam/mu leaves float64 "
                         f"for lam={lam!r}, mu={mu!r}")
    return MoreauConstants(L_F=lam, mu_F=mu_F, kappa_F=kappa_F)


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
