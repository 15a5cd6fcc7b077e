"""The batched CNN's training pass by hand: forward and backward of
:class:`algorithms.engine.models.CNN` for all clients, with the large scratch tensors of a
step kept across steps.

Why (issue 44, W2: Fashion-MNIST, N = 40, FedAvgCNN): under autograd every step allocated
its batched temporaries afresh — the first convolution's output ``[N·32, B, 24, 24]``
(29.5 MB), its gradient (again), the unfolded input, the ``1024 × 512`` dense weight's
gradient (84 MB) — all above glibc's mmap threshold, so each was returned to the kernel on
free and faulted in (zeroed page by page) on the next step: ~36 % of the round's CPU time
was the kernel clearing pages.  Here those tensors are written into buffers that live as
long as the thread keeps training on the same shapes (:class:`Workspace`), and the dense
weight gradients into the caller's ``out`` (the previous step's gradient, once consumed:
:func:`algorithms.engine.steps.local_sgd`).

The arithmetic, per client ``i`` (``x`` its mini-batch ``[B, C_in, S, S]``):

* conv1 as one batched product (no grouped convolution with one input channel per group,
  the slow kernel): ``cols_i = unfold₅ₓ₅(x_i)`` ``[C_in·25, 4·B·q²]`` (q = (S − 4) // 2;
  columns ordered so that each pooling window's four entries lie in four contiguous
  blocks, :func:`conv1_columns`), ``z₁ = W₁ cols + b₁``; then 2×2 max-pool (elementwise
  maxima, :func:`max4`) and ReLU (in that order: ReLU is monotone, so
  ``max ∘ relu = relu ∘ max``, and the ReLU runs on a quarter of the entries);
* conv2 as the grouped convolution over clients (groups = N), pool, ReLU;
* the dense layers ``h ← relu(h W + b)``, the last without ReLU; mean cross-entropy.

Backward: ``dz = (softmax − onehot) / B`` at the logits; a dense layer gives
``∇W = hᵀ dz``, ``∇b = Σ_B dz``, ``dh = dz Wᵀ`` masked by ``h > 0``; pooling and ReLU
backward routed to each window's first maximum (:func:`pool2_backward`, as
``max_pool2d_with_indices_backward``) and ``aten.threshold_backward`` (autograd's ReLU
backward), conv2 by ``aten.convolution_backward``,
conv1's weight by ``∇W₁ = dz₁ colsᵀ``.  Checked against autograd of
:meth:`~algorithms.engine.model_base.Model.per_client_loss` in float64 (tests/algorithms/test_cnn_grad.py).
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

from algorithms.engine.model_base import TRANSPOSED_MAX_OUT, _dense

Params = dict[str, torch.Tensor]

_LOCAL = threading.local()


class Workspace:
    """Scratch tensors by name, reused while the requested shape, dtype and device stay the
    same (each is fully overwritten before it is read, so no value carries over).  One per
    thread (:func:`workspace`): tiles trained on several threads never share one."""

    def __init__(self) -> None:
        self.buffers: dict[str, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        buf = self.buffers.get(name)
        if buf is None or buf.shape != shape or buf.dtype != like.dtype \
                or buf.device != like.device:
            self.buffers.pop(name, None)           # the old one freed before the new one
            buf = self.buffers[name] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buf


def workspace() -> Workspace:
    """This thread's :class:`Workspace`."""
    ws = getattr(_LOCAL, "ws", None)
    if ws is None:
        ws = _LOCAL.ws = Workspace()
    return ws


def release_workspace() -> None:
    """Free this thread's scratch tensors (they are re-created on the next training step)."""
    _LOCAL.ws = None


def _reusable(out: Params | None, key: str, shape, like: torch.Tensor) -> torch.Tensor | None:
    t = None if out is None else out.get(key)
    if t is None or t.shape != shape or t.dtype != like.dtype or t.device != like.device \
            or not t.is_contiguous():
        return None
    return t


def quadrants(z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The four entries of every 2×2 window over the last two axes of ``z`` (stride 2; an
    odd trailing row/column dropped, as ``F.max_pool2d``) as strided views: top-left,
    top-right, bottom-left, bottom-right."""
    q0, q1 = z.shape[-2] // 2, z.shape[-1] // 2
    z = z[..., :2 * q0, :2 * q1]
    return z[..., 0::2, 0::2], z[..., 0::2, 1::2], z[..., 1::2, 0::2], z[..., 1::2, 1::2]


def max4(tl: torch.Tensor, tr: torch.Tensor, bl: torch.Tensor, br: torch.Tensor, *,
         record: bool = False):
    """2×2 max-pool from a window's four entries (:func:`quadrants`, or the quadrant blocks
    of :func:`conv1_pool`'s layout) as three elementwise maxima — ~7× faster on one CPU
    thread than ``F.max_pool2d`` on the W2 shapes (50 → 7 ms for ``[1280, 10, 24, 24]``).
    ``record``: also the winners, ``(pooled, (down, right_top, right_bottom))``: ``down``
    where the bottom row's maximum is strictly larger than the top row's, the other two
    where the right entry of the top / bottom row is strictly larger than the left — the
    first maximum in scan order, which is ``F.max_pool2d``'s choice (its kernel keeps the
    first and replaces it only by a strictly larger value), so :func:`max4_backward`
    routes the gradient exactly as ``max_pool2d_with_indices_backward`` does, ties
    included."""
    top, bottom = torch.maximum(tl, tr), torch.maximum(bl, br)
    pooled = torch.maximum(top, bottom)
    if not record:
        return pooled
    return pooled, (bottom > top, tr > tl, br > bl)


def max4_backward(g: torch.Tensor, winners, outs: tuple[torch.Tensor, ...]) -> None:
    """The gradient of :func:`max4` written into ``outs`` (the four entries' places, as
    :func:`quadrants` or blocks): ``g`` at each window's winner, 0 elsewhere.  By products
    with the masks and differences, ``bottom = g·down``, ``top = g − bottom`` (exact: one
    of the two is ``g``, the other 0) — a ``torch.where`` with a boolean condition is ~5×
    slower on CPU.  (A non-finite ``g`` gives NaN in place of the 0s: the run has
    diverged then anyway.)"""
    down, right_top, right_bottom = winners
    tl, tr, bl, br = outs
    bottom = g * down
    top = g - bottom
    torch.mul(top, right_top, out=tr)
    torch.sub(top, tr, out=tl)
    torch.mul(bottom, right_bottom, out=br)
    torch.sub(bottom, br, out=bl)


def pool2(z: torch.Tensor, *, record: bool = False):
    """2×2 max-pool (stride 2) over the last two axes by :func:`max4`."""
    return max4(*quadrants(z), record=record)


def pool2_backward(g: torch.Tensor, winners, out: torch.Tensor) -> torch.Tensor:
    """The gradient of :func:`pool2` into ``out`` (the pre-pool shape)."""
    if out.shape[-2] % 2 or out.shape[-1] % 2:
        out.zero_()                                   # the dropped row/column: no gradient
    max4_backward(g, winners, quadrants(out))
    return out


def conv1_columns(x: torch.Tensor, kernel: int, out: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """``x[N, B, C, S, S]`` (contiguous) unfolded for a ``kernel × kernel`` convolution
    followed by a 2×2 pool, as ``[N, C·k², 4·B·q²]`` (``q = (S − k + 1) // 2``): row
    ``c·k² + a·k + e`` holds ``x[n, ·, c, i + a, j + e]`` with the output positions
    ``(i, j) = (2i' + u, 2j' + v)`` ordered ``(u, v, b, i', j')`` — each pooling window's
    four entries in four contiguous blocks (:func:`max4` then reads them contiguously).  A
    strided view of ``x`` copied once, into ``out`` when given."""
    n, b, c, side, _ = x.shape
    q = (side - kernel + 1) // 2
    sn, sb, sc, sh, sw = x.stride()
    view = x.as_strided((n, c, kernel, kernel, 2, 2, b, q, q),
                        (sn, sc, sh, sw, sh, sw, sb, 2 * sh, 2 * sw), x.storage_offset())
    if out is None:
        out = torch.empty((n, c * kernel * kernel, 4 * b * q * q), dtype=x.dtype,
                          device=x.device)
    out.view(n, c, kernel, kernel, 2, 2, b, q, q).copy_(view)
    return out


def conv1_pool(model, params: Params, x: torch.Tensor, ws: Workspace | None = None,
               prefix: str = ""):
    """First convolution (one batched product over :func:`conv1_columns`), 2×2 max-pool,
    ReLU: ``(a₁ [N·C₁, B, q, q] client-major, pool winners (when ``ws`` is given and
    ``prefix`` is empty: training), z₁ [N, C₁, 4, B·q²] (the four blocks of
    :func:`conv1_columns`), cols)``; ``ws``: the scratch for ``cols`` and ``z₁`` (named
    with ``prefix``)."""
    n, b = x.shape[:2]
    cin, side, c1 = model.in_channels, model.image_size, model.channels[0]
    q = (side - 4) // 2
    x = x.reshape(n, b, cin, side, side).contiguous()
    cols = conv1_columns(x, 5, None if ws is None else
                         ws.get(prefix + "cols", (n, cin * 25, 4 * b * q * q), x))
    w1 = params["conv1.weight"].reshape(n, c1, cin * 25)
    bias = params["conv1.bias"].unsqueeze(2)
    if ws is None:
        z1 = torch.baddbmm(bias, w1, cols)
    else:
        z1 = torch.baddbmm(bias, w1, cols, out=ws.get(prefix + "z1", (n, c1, 4 * b * q * q), x))
    z1 = z1.view(n, c1, 4, b * q * q)
    record = ws is not None and not prefix
    pooled = max4(*z1.unbind(2), record=record)
    p1, i1 = pooled if record else (pooled, None)
    return p1.view(n * c1, b, q, q).clamp_min_(0), i1, z1, cols


def to_batch_major(a: torch.Tensor, n: int) -> torch.Tensor:
    """``[N·C, B, q, q]`` (client-major) → ``[B, N·C, q, q]``, the grouped convolution's
    layout."""
    nc, b, q, _ = a.shape
    return a.view(n, nc // n, b, q, q).permute(2, 0, 1, 3, 4).reshape(b, nc, q, q)


def cnn_grad(model, params: Params, x: torch.Tensor, y: torch.Tensor,
             out: Params | None = None) -> tuple[Params, torch.Tensor]:
    """Per-client gradients of the mean cross-entropy (+ ``l2/2 ‖W‖²`` over the weights) and
    the losses ``[N]`` of the batched CNN ``model`` (the module docstring has the formulas).
    ``out``: gradients the caller no longer needs (the previous step's); dense-weight
    gradients of the same shape are written into them."""
    n, b = x.shape[:2]
    c1, c2 = model.channels
    ws = workspace()
    # ---- forward
    a1, i1, z1, cols = conv1_pool(model, params, x, ws)
    h1 = to_batch_major(a1, n)                                        # [B, N·C₁, q₁, q₁]
    w2 = params["conv2.weight"].reshape(n * c2, c1, 5, 5)
    z2 = F.conv2d(h1, w2, params["conv2.bias"].reshape(-1), groups=n)  # [B, N·C₂, s₂, s₂]
    p2, i2 = pool2(z2, record=True)
    a2 = p2.clamp_min_(0)
    q2 = a2.shape[-1]
    hs = [a2.view(b, n, c2 * q2 * q2).transpose(0, 1)]                # [N, B, flat]
    last = len(model.widths) - 1
    for l in range(1, last + 1):
        z = _dense(hs[-1], params[f"fc{l}.weight"], params[f"fc{l}.bias"])
        hs.append(z.clamp_min_(0) if l < last else z)
    logp = torch.log_softmax(hs[-1], 2)                               # [N, B, C]
    yc = y.unsqueeze(2)
    loss = -logp.gather(2, yc).squeeze(2).mean(1)
    dz = logp.exp_().scatter_add_(2, yc, torch.full_like(logp[:, :, :1], -1.0)).div_(b)
    # ---- backward through the dense layers
    grads: Params = {}
    for l in range(last, 0, -1):
        h, w = hs[l - 1], params[f"fc{l}.weight"]
        key = f"fc{l}.weight"
        if w.shape[2] <= TRANSPOSED_MAX_OUT:       # narrow: (dzᵀ h)ᵀ, ~3× faster on CPU
            gw = torch.bmm(dz.transpose(1, 2), h).transpose(1, 2)
        else:
            buf = _reusable(out, key, w.shape, w)
            gw = torch.bmm(h.transpose(1, 2), dz, out=buf) if buf is not None else \
                torch.bmm(h.transpose(1, 2), dz)
        grads[key] = gw
        grads[f"fc{l}.bias"] = dz.sum(1)
        dh = torch.bmm(dz, w.transpose(1, 2))                           # [N, B, d_in]
        dz = torch.ops.aten.threshold_backward(dh, h, 0) if l > 1 else dh
    # ---- conv2, pool, ReLU
    da2 = dz.transpose(0, 1).reshape(a2.shape)                          # [B, N·C₂, q₂, q₂]
    dz2 = pool2_backward(torch.ops.aten.threshold_backward(da2, a2, 0), i2,
                         torch.empty_like(z2))
    dh1, gw2, gb2 = torch.ops.aten.convolution_backward(
        dz2, h1, w2, [n * c2], [1, 1], [0, 0], [1, 1], False, [0, 0], n, [True, True, True])
    grads["conv2.weight"] = gw2.view(params["conv2.weight"].shape)
    grads["conv2.bias"] = gb2.view(n, c2)
    # ---- conv1 (its input needs no gradient)
    q1 = a1.shape[-1]
    da1 = dh1.view(b, n, c1, q1, q1).permute(1, 2, 0, 3, 4).reshape(a1.shape)
    dz1 = ws.get("dz1", z1.shape, z1)                                  # [N, C₁, 4, B·q²]
    max4_backward(torch.ops.aten.threshold_backward(da1, a1, 0).view(n, c1, -1), i1,
                  dz1.unbind(2))
    dz1 = dz1.view(n, c1, -1)
    grads["conv1.weight"] = torch.bmm(dz1, cols.transpose(1, 2)).view(
        params["conv1.weight"].shape)
    grads["conv1.bias"] = dz1.sum(2)
    if model.l2 > 0:
        reg = 0.0
        for k in params:
            if k.endswith("weight"):
                grads[k] = grads[k].add_(params[k], alpha=model.l2) if grads[k].is_contiguous() \
                    else grads[k] + model.l2 * params[k]
                reg = reg + (params[k] ** 2).flatten(1).sum(1)
        loss = loss + 0.5 * model.l2 * reg
    return {k: grads[k] for k in params}, loss
