"""Local-training building blocks shared by the algorithms (all clients batched).

:func:`prox_steps` is the one implementation of pFedMe's inner solve (and CGPFL's
personalized step; Ditto's personal model).  For multinomial logistic regression without an
ℓ2 term it runs the K steps in logit space (:func:`mlr_prox_steps`, derivation there): the
same iterates in exact arithmetic, with a ``C × |D|`` by ``|D| × |D|`` product and four
small ops on ``[N, C, |D|]`` logits per step instead of two ``C × d`` products and ~15 ops
on the parameters (pFedMe round at N = 100 on a 2-core CPU: 29 → 13 ms with one torch
thread); any other model takes the generic loop (:func:`generic_prox_steps`).
:func:`map_tiles` runs independent client tiles on several threads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import torch

from algorithms.engine.base import Params
from algorithms.engine.models import MLR, Model
from algorithms.engine.models_norm import buffered_sgd, has_buffers

T = TypeVar("T")


def local_sgd(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor,
              lr: float, *, owned: bool = False) -> Params:
    """Plain SGD: one step per mini-batch; ``x[R, N, B, ...]``, ``y[R, N, B]``.  A model with
    BatchNorm buffers (:mod:`algorithms.engine.models_norm`) trains in batch-statistics mode and
    moves its running statistics (:func:`~algorithms.engine.models_norm.buffered_sgd`).

    The steps run in place (:func:`sgd_update`) on a copy made by the first step, or on
    ``params`` itself from the first step when ``owned`` (the caller's own fresh copy, e.g.
    from :func:`~algorithms.engine.base.broadcast`): the same iterates either way."""
    if has_buffers(model):
        return buffered_sgd(model, params, x, y, lr)
    g = None
    for r in range(x.shape[0]):
        g, _ = model_grad(model, params, x[r], y[r], out=g)
        params = sgd_update(params, g, lr, in_place=owned or r > 0)
    return params


def model_grad(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor, *,
               out: Params | None = None) -> tuple[Params, torch.Tensor]:
    """``model.grad(params, x, y)``; ``out`` (gradients the caller has consumed, e.g. the
    previous step's) is handed on to a model whose ``grad`` writes into it
    (``reuses_out``: the CNN), so a step's large gradient tensors are not allocated (and
    page-faulted in) afresh every step."""
    if out is not None and getattr(model, "reuses_out", False):
        return model.grad(params, x, y, out=out)
    return model.grad(params, x, y)


def sgd_update(params: Params, g: Params, lr: float, *, in_place: bool) -> Params:
    """``θ − lr·g`` computed as ``lr·g`` into ``g`` (consumed: gradients are fresh tensors
    the caller owns), then ``θ − (lr·g)`` — into ``θ`` itself when ``in_place`` (the
    caller's own copy: every step after the first), else into new tensors (the first step
    must not write the tensors it was handed: they may be the state's).  The same two
    roundings as ``params[k] - lr * g[k]``, so the iterates are unchanged bit for bit, with
    no temporaries."""
    scaled = {k: g[k].mul_(lr) for k in params}
    if in_place:
        for k in params:
            params[k].sub_(scaled[k])
        return params
    return {k: params[k] - scaled[k] for k in params}


def prox_steps(model: Model, theta: Params, anchor: Params, x: torch.Tensor,
               y: torch.Tensor, *, lam: float, lr: float, steps: int,
               extra_l2: float = 0.0, owned: bool = False,
               scratch: dict | None = None) -> Params:
    """``steps`` gradient steps on ``f̃_i(θ; D) + λ/2 ‖θ − anchor_i‖² (+ extra_l2/2 ‖θ‖²)``
    on the *same* mini-batch ``x[N, B, ...]`` (pFedMe eq. 7, Algorithm 1 of Dinh et al.,
    NeurIPS 2020; CGPFL's personalized step):
    ``θ ← θ − lr (∇f̃_i(θ) + λ(θ − anchor) + extra_l2 θ)``.

    MLR with ``l2 = 0`` goes through :func:`mlr_prox_steps` (the same iterates, computed in
    logit space); every other model — a subclass with its own ``grad`` too — through
    :func:`generic_prox_steps` (``owned`` and ``scratch`` there)."""
    if _logit_space(model, theta):
        return mlr_prox_steps(theta, anchor, x, y, lam=lam, lr=lr, steps=steps,
                              extra_l2=extra_l2)
    return generic_prox_steps(model, theta, anchor, x, y, lam=lam, lr=lr, steps=steps,
                              extra_l2=extra_l2, owned=owned, scratch=scratch)


def _logit_space(model: Model, theta: Params) -> bool:
    return (isinstance(model, MLR) and type(model).grad is MLR.grad and model.l2 == 0
            and set(theta) == {"fc.weight", "fc.bias"})


def prox_layout(model: Model, params: Params) -> Params:
    """``params`` (same values) in the memory layout :func:`prox_steps` runs fastest in: for
    the logit-space path, MLR's weight class-major (``[N, C, d]`` in memory, still the
    ``[N, d, C]`` view), which the solve then keeps — its result is one batched product with
    no strided update (pFedMe round at N = 100: ~6% faster).  Other models: unchanged.
    Elementwise updates keep the layout of their first operand; ``.contiguous()`` restores
    the usual one."""
    if not _logit_space(model, params):
        return params
    w = params["fc.weight"]
    return {**params, "fc.weight": w.transpose(1, 2).contiguous().transpose(1, 2)}


def generic_prox_steps(model: Model, theta: Params, anchor: Params, x: torch.Tensor,
                       y: torch.Tensor, *, lam: float, lr: float, steps: int,
                       extra_l2: float = 0.0, owned: bool = False,
                       scratch: dict | None = None) -> Params:
    """:func:`prox_steps` for any model: ``model.grad`` each step (handed the previous
    step's gradient to write into: :func:`model_grad`), and the update evaluated as
    ``(1 − lr(λ + extra_l2)) θ + lr λ anchor − lr ∇f̃_i(θ)`` (three tensor ops instead of
    five), in place after the first step — or from the first when ``owned`` (``theta`` is
    the caller's own copy, not ``anchor``).  ``scratch``: a dict the caller keeps across
    calls; the last gradient is left in it for the next call to write into."""
    keep = 1.0 - lr * (lam + extra_l2)
    g = None if scratch is None else scratch.get("grad")
    for s in range(steps):
        g, _ = model_grad(model, theta, x, y, out=g)
        if s == 0 and not owned:   # new tensors: ``theta`` (and ``anchor``) not written
            theta = {k: torch.mul(theta[k], keep) for k in theta}
        else:           # then the same three operations in place, no temporaries
            for v in theta.values():
                v.mul_(keep)
        for k, v in theta.items():
            v.add_(anchor[k], alpha=lr * lam).sub_(g[k], alpha=lr)
    if scratch is not None:
        scratch["grad"] = g
    return theta


def mlr_prox_steps(theta: Params, anchor: Params, x: torch.Tensor, y: torch.Tensor, *,
                   lam: float, lr: float, steps: int, extra_l2: float = 0.0) -> Params:
    """:func:`prox_steps` for :class:`~algorithms.engine.models.MLR` with ``l2 = 0`` (the bias is
    not regularised, so an ``l2 > 0`` model takes the generic loop), in logit space.

    Derivation (pFedMe eq. 7 solved by K gradient steps, Algorithm 1 of Dinh et al., NeurIPS
    2020).  Fold the bias in: per client ``Θ = [Wᵀ, b]`` (``C × (d+1)``, class-major) and
    ``X̃ = [x, 1]`` (``B × (d+1)``), logits ``Z = Θ X̃ᵀ`` (``C × B``).  The mean
    cross-entropy's gradient is ``P X̃ / B`` with ``P = softmax(Z) − onehot(y)`` (softmax
    over classes), so one step with ``η = lr``, ``κ = 1 − η(λ + extra_l2)``, ``c = ηλ`` and
    anchor ``A`` is

        Θ_{k+1} = κ Θ_k + c A − (η/B) P_k X̃.                                  (1)

    Multiplying (1) by ``X̃ᵀ`` on the right gives the logits without ``Θ``:

        Z_{k+1} = κ Z_k + c Z_A − (η/B) P_k G,   Z_A = A X̃ᵀ,   G = X̃ X̃ᵀ = x xᵀ + 1,   (2)

    a ``C × B`` by ``B × B`` product per step (``G`` is ``|D| × |D|``, 20 × 20 in pFedMe's
    setting) instead of two ``C × d`` by ``d × B`` ones plus the updates of ``Θ``.
    Unrolling (1) K times,

        Θ_K = κ^K Θ_0 + c (Σ_{j<K} κ^j) A − (η/B) P_acc X̃,   P_acc = Σ_{k<K} κ^{K−1−k} P_k,   (3)

    and ``P_acc`` is accumulated as ``P_acc ← κ P_acc + P_k`` (k = 0 … K−1).  So a call
    costs the products ``Z_0``, ``Z_A``, ``G`` (the last two only when K > 1; ``Z_A = Z_0``
    when ``theta`` is ``anchor``), K softmaxes, K − 1 steps (2) and one product (3) — the
    iterates of :func:`generic_prox_steps` in exact arithmetic (tested against it in float64
    over random shapes to ~1e-12 relative).  The weight is returned in ``theta``'s layout
    (class-major after :func:`prox_layout`: then (3) is a single in-place ``baddbmm_``;
    in place, too, in (2): a ``baddbmm`` with an input copies it first)."""
    w0, b0 = theta["fc.weight"], theta["fc.bias"]               # [N, d, C], [N, C]
    wa, ba = anchor["fc.weight"], anchor["fc.bias"]
    x = x.flatten(2)                                              # [N, B, d]
    batch = x.shape[1]
    keep, c, step = 1.0 - lr * (lam + extra_l2), lr * lam, lr / batch
    xt = x.transpose(1, 2)                                        # [N, d, B]
    z = torch.baddbmm(b0.unsqueeze(2), w0.transpose(1, 2), xt)    # Z_0 [N, C, B]
    # P is held class-outer, [C, N, B]: a softmax over dim 0 then runs over N·B contiguous
    # positions (~2× faster on CPU than over dim 1 of [N, C, B], whose inner length |D| = 20
    # is not a multiple of the vector width); the products read it through a permuted view
    y0 = y.unsqueeze(0)                                           # [1, N, B]
    minus_one = torch.full_like(y0, -1.0, dtype=z.dtype)
    if steps > 1:
        same = w0 is wa and b0 is ba
        cza = z * c if same else torch.baddbmm(ba.unsqueeze(2), wa.transpose(1, 2), xt,
                                               beta=c, alpha=c)    # c Z_A
        gram = torch.baddbmm(x.new_ones(()).expand(1, 1, 1), x, xt)   # G = x xᵀ + 1 [N, B, B]
    p_acc = None
    for k in range(steps):
        p = torch.softmax(torch.permute_copy(z, (1, 0, 2)), 0).scatter_add_(0, y0, minus_one)
        p_acc = p if p_acc is None else torch.add(p, p_acc, alpha=keep)
        if k + 1 < steps:                                         # (2)
            z = torch.add(cza, z, alpha=keep).baddbmm_(p.permute(1, 0, 2), gram, alpha=-step)
    p_acc = p_acc.permute(1, 0, 2)                                # [N, C, B]
    decay = keep ** steps
    pull = c * sum(keep ** j for j in range(steps))
    # (3), the product as (P_acc x)ᵀ: ~4× faster on CPU than xᵀ P_accᵀ (tiny matrices)
    base = torch.mul(w0, decay).add_(wa, alpha=pull)          # in w0's layout
    if w0.transpose(1, 2).is_contiguous():                     # class-major (prox_layout)
        w = base.transpose(1, 2).baddbmm_(p_acc, x, alpha=-step).transpose(1, 2)
    else:
        w = base.sub_(torch.bmm(p_acc, x).transpose(1, 2), alpha=step)
    b = torch.mul(b0, decay).add_(ba, alpha=pull).sub_(p_acc.sum(2), alpha=step)
    return {"fc.weight": w, "fc.bias": b}


def map_tiles(fn: Callable[[int], T], starts: Sequence[int], device) -> list[T]:
    """``[fn(s) for s in starts]`` for independent client tiles.  On a CPU with ``T =
    torch.get_num_threads() > 1`` the tiles run in ``T`` Python threads with one torch
    thread each (torch's count is set to 1 meanwhile and restored): tiny batched kernels
    split across cores wait at a barrier per op — on a shared machine for a thread the
    scheduler has parked (pfl_theory.threads) — while whole tiles per thread never meet.
    Each tile is computed exactly as with one thread, so results do not depend on ``T``."""
    threads = torch.get_num_threads()
    if threads == 1 or len(starts) == 1 or torch.device(device).type != "cpu":
        return [fn(s) for s in starts]
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(min(threads, len(starts))) as pool:
            return list(pool.map(fn, starts))
    finally:
        torch.set_num_threads(threads)
