"""Estimators of a federation's constants that need the engine's models (torch, float64).

The pure-array versions (closed forms, Definitions 2–3 of CGPFL) are in
:mod:`pfl_theory.constants`; here the client losses are the engine's
``model.per_client_loss`` on each client's full training set, so the constants belong to
the very problem a check runs:

* :func:`client_data` — every client's training set as ``x [N, n, ...]``, ``y [N, n]``
  (equal client sizes required: the full-data loss is then one batched call);
* :func:`client_hessians` — exact per-client Hessians by autograd (exact L, μ for
  quadratics via :func:`pfl_theory.constants.quadratic_constants`);
* :func:`per_sample_gradients`, :func:`gamma_f_sq` — pFedMe A2's γ_f² (max over clients and
  the given points of the one-sample gradient variance);
* :func:`sampled_smoothness` — L of a DNN by power iteration on Hessian-vector products at
  sampled points (a *lower estimate* of the sup; stated as such);
* :func:`envelope_value` and :func:`envelope_minimum` — F(w) = (1/N)Σ F_i(w) (Moreau
  envelopes, pFedMe eq. (3)) and F* = min_w F, by L-BFGS (:func:`pfl_theory.moreau.prox`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from algorithms.engine.base import flatten, unflatten
from pfl_theory import moreau
from pfl_theory.constants import gradient_variance
from pfl_theory.validation import positive, positive_int


def client_data(fed) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [N, n, ...], y [N, n])``: each client's training set (all sizes must be equal)."""
    tr = fed.train
    counts = tr.counts.tolist()
    if len(set(counts)) != 1:
        raise ValueError(f"client_data needs equal client sizes, got {sorted(set(counts))}")
    n = counts[0]
    idx = tr.offsets[:, None] + torch.arange(n, device=tr.offsets.device)[None]
    return tr.x[idx], tr.y[idx]


flat_params = flatten  # ``[N, d]`` concatenation of a parameter dict (algorithms.engine.base)
unflat_params = unflatten  # its inverse


def client_hessians(model, params: dict, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Exact Hessians ``[N, p, p]`` of each client's loss ``model.per_client_loss`` at
    ``params`` (``[N, ...]``), by autograd (p = number of parameters)."""
    flat = flat_params(params).detach()
    hs = []
    for i in range(flat.shape[0]):
        def f(v, i=i):
            return model.per_client_loss(unflat_params(v[None], params), x[i:i + 1], y[i:i + 1])[0]
        hs.append(torch.autograd.functional.hessian(f, flat[i]).cpu().numpy())
    return np.stack(hs)


def per_sample_gradients(model, params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One client's per-sample gradients ``[n, p]`` at ``params`` (``[1, ...]``): the n
    samples are treated as n clients of one batched ``model.grad`` call."""
    n = x.shape[0]
    expanded = {k: v.expand(n, *v.shape[1:]) for k, v in params.items()}
    g, _ = model.grad(expanded, x[:, None], y[:, None])
    return flat_params(g)


def gamma_f_sq(model, x: torch.Tensor, y: torch.Tensor, points: list[dict]) -> float:
    """γ_f² of pFedMe A2 (docs/formulas.md §B.2): max over clients i and the given points
    w (each ``[1, ...]``) of (1/n)Σ_j‖∇f̃(w; ξ_ij) − ∇f_i(w)‖² — exact for losses whose
    per-sample gradient noise does not depend on w (quadratics), otherwise a lower
    estimate of the sup over w."""
    best = 0.0
    for w in points:
        for i in range(x.shape[0]):
            g = per_sample_gradients(model, w, x[i], y[i]).detach().cpu().numpy()
            best = max(best, gradient_variance(g))
    return best


def sampled_smoothness(model, x: torch.Tensor, y: torch.Tensor, points: list[dict], *,
                       iterations: int = 50, seed: int = 0) -> float:
    """Lower estimate of L = sup_w ‖∇²f_i(w)‖₂ (max over clients): power iteration on
    Hessian-vector products at each sampled point ``points`` (``[1, ...]`` each)."""
    gen = torch.Generator().manual_seed(seed)
    best = 0.0
    for w in points:
        flat = flat_params(w).detach()[0]
        for i in range(x.shape[0]):
            def f(v, i=i):
                return model.per_client_loss(unflat_params(v[None], w), x[i:i + 1], y[i:i + 1])[0]
            v = torch.randn(flat.shape, generator=gen, dtype=flat.dtype).to(flat.device)
            v = v / v.norm()
            est = 0.0
            for _ in range(positive_int("iterations", iterations)):
                _, hv = torch.autograd.functional.hvp(f, flat, v)
                est = float(hv.norm())
                if est == 0:
                    break
                v = hv / hv.norm()
            best = max(best, est)
    return best


def envelope(model, x: torch.Tensor, y: torch.Tensor, w: dict, *, lam: float,
             tol: float = 1e-20) -> moreau.Envelope:
    """Per-client Moreau envelopes F_i(w) = min_θ {f_i(θ) + λ/2‖θ − w‖²} (pFedMe eq. (3))
    and their gradients λ(w − θ̂_i(w)) (eq. 6), f_i the full-data client loss; the N prox
    problems are solved jointly by :func:`pfl_theory.moreau.prox` (L-BFGS to
    ‖∇h_i‖² ≤ ``tol``).  ``w`` is ``[1, ...]``."""
    n = x.shape[0]
    wf = flat_params(w).detach().expand(n, -1).contiguous()

    def f(theta):
        return model.per_client_loss(unflat_params(theta, w), x, y)

    return moreau.prox(f, wf, lam=positive("lam", lam), tol=tol)


def envelope_value(model, x: torch.Tensor, y: torch.Tensor, w: dict, *, lam: float,
                   tol: float = 1e-20) -> float:
    """F(w) = (1/N)Σ_i F_i(w) (see :func:`envelope`)."""
    return float(envelope(model, x, y, w, lam=lam, tol=tol).value.mean())


def envelope_values(model, x: torch.Tensor, y: torch.Tensor, ws: torch.Tensor, like: dict, *,
                    lam: float, tol: float = 1e-20) -> np.ndarray:
    """F(w) for every row of ``ws`` [M, p] (flat parameters laid out as ``like``), all M·N
    prox problems in one joint :func:`pfl_theory.moreau.prox` call."""
    m, n = ws.shape[0], x.shape[0]
    xr = x[None].expand(m, *x.shape).reshape(m * n, *x.shape[1:])
    yr = y[None].expand(m, *y.shape).reshape(m * n, *y.shape[1:])
    wr = ws[:, None, :].expand(m, n, ws.shape[1]).reshape(m * n, ws.shape[1]).contiguous()

    def f(theta):
        return model.per_client_loss(unflat_params(theta, like), xr, yr)

    env = moreau.prox(f, wr, lam=positive("lam", lam), tol=tol)
    return env.value.reshape(m, n).mean(1).numpy()


def envelope_minimum(model, x: torch.Tensor, y: torch.Tensor, like: dict, *, lam: float,
                     max_iter: int = 500) -> tuple[float, dict]:
    """(F*, w*) with F* = min_w F(w) = min_{w, θ_1..θ_N} (1/N)Σ f_i(θ_i) + λ/2‖θ_i − w‖²
    (jointly convex for convex f_i), by L-BFGS on the joint variables from w = θ_i = 0.
    ``like`` gives the parameter layout (``[1, ...]``)."""
    lam = positive("lam", lam)
    n = x.shape[0]
    p = flat_params(like).shape[1]
    dtype, dev = next(iter(like.values())).dtype, next(iter(like.values())).device
    w = torch.zeros(p, dtype=dtype, device=dev, requires_grad=True)
    th = torch.zeros(n, p, dtype=dtype, device=dev, requires_grad=True)
    opt = torch.optim.LBFGS([w, th], lr=1.0, max_iter=positive_int("max_iter", max_iter),
                            history_size=50, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-14, tolerance_change=0.0)

    def closure():
        opt.zero_grad()
        loss = (model.per_client_loss(unflat_params(th, like), x, y)
                + 0.5 * lam * ((th - w) ** 2).sum(1)).mean()
        loss.backward()
        return loss

    worst = math.inf
    with torch.enable_grad():
        for _ in range(5):
            opt.step(closure)
            worst = max(float(v.grad.abs().max()) for v in (w, th))
            if worst < 1e-13:  # round-off level of O(1) float64 losses
                break
    if worst > 1e-8:  # F* off by ~worst²/μ: not a number to measure a gap against
        raise ValueError(f"envelope_minimum did not converge: max |grad| = {worst:.3g}")
    w_star = unflat_params(w.detach()[None], like)
    return envelope_value(model, x, y, w_star, lam=lam), w_star


def stack_points(points: list[dict]) -> Any:
    """``[P, p]`` flat parameter vectors of a list of ``[1, ...]`` parameter dicts."""
    return torch.cat([flat_params(w) for w in points]).detach().cpu().numpy()
