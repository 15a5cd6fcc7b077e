"""Feature-shift federations: the same label distribution everywhere, a different input
distribution on every client (FedBN's setting: X. Li, M. Jiang, X. Zhang, M. Kamp, Q. Dou,
*FedBN*, ICLR 2021 — there each client is another digits dataset; here each client sees the
pool through its own image transform).

:func:`feature_shift_partition` splits the pool IID over the clients (as
:func:`synthetic.partition.iid_partition`: labels unchanged, class proportions alike), then
transforms every image of client ``i`` — train and test alike, as a domain — by

1. a rotation by ``θ_i ~ U[−rotation, rotation]`` degrees about the image centre (bilinear,
   zero outside the image, the image size kept; ``scipy.ndimage.rotate``),
2. a contrast change around each image's own mean, ``x ← m + c_i (x − m)``, with ``log c_i ~
   U[−log contrast, log contrast]`` (``contrast = 1``: none),
3. additive Gaussian noise of standard deviation ``σ_i ~ U[0, noise]`` (pixel units; no
   clipping).

All draws come from the data ``seed`` (same seed ⇒ same partition, transforms and noise).
:class:`ClientShift` records each client's ``(θ_i, c_i, σ_i)``.  Rotation needs square
images ``[n, C, H, H]`` (digits, mnist5k, the local image sets); contrast and noise apply to
any features.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from synthetic.partition import Partition, _pool, _rng, iid_partition
from pfl_theory.validation import in_range, nonnegative, positive_int

__all__ = ["ClientShift", "client_shifts", "apply_shift", "feature_shift_partition"]


class ClientShift(NamedTuple):
    """Client ``i``'s input transform: rotation (degrees), contrast factor, noise std."""

    rotation: float
    contrast: float
    noise: float


def client_shifts(num_clients: int, *, rotation: float, contrast: float, noise: float,
                  rng: np.random.Generator) -> list[ClientShift]:
    """One :class:`ClientShift` per client, drawn from ``rng`` (see the module docstring)."""
    n = positive_int("num_clients", num_clients)
    angles = rng.uniform(-rotation, rotation, n) if rotation > 0 else np.zeros(n)
    log_c = math.log(contrast)
    factors = np.exp(rng.uniform(-log_c, log_c, n)) if log_c > 0 else np.ones(n)
    sigmas = rng.uniform(0.0, noise, n) if noise > 0 else np.zeros(n)
    return [ClientShift(float(a), float(c), float(s)) for a, c, s in zip(angles, factors, sigmas)]


def apply_shift(x: np.ndarray, shift: ClientShift, rng: np.random.Generator) -> np.ndarray:
    """``x[n, ...]`` through ``shift`` (rotation of the last two axes, contrast about each
    sample's mean, then noise drawn from ``rng``); float32 like the partitions' output."""
    out = np.asarray(x, dtype=np.float64)
    if shift.rotation != 0.0:
        _check_square(out.shape)
        from scipy import ndimage

        out = ndimage.rotate(out, shift.rotation, axes=(-2, -1), reshape=False, order=1,
                             mode="constant", cval=0.0)
    if shift.contrast != 1.0:
        mean = out.reshape(len(out), -1).mean(1).reshape(-1, *([1] * (out.ndim - 1)))
        out = mean + shift.contrast * (out - mean)
    if shift.noise > 0.0:
        out = out + rng.normal(0.0, shift.noise, out.shape)
    return out.astype(np.float32)


def feature_shift_partition(x: Any, y: Any, *, num_clients: int, seed: Any,
                            rotation: float = 45.0, contrast: float = 2.0, noise: float = 0.1
                            ) -> tuple[Partition, list[ClientShift]]:
    """IID split of ``(x, y)`` over ``num_clients`` clients, client ``i``'s inputs through
    its own :class:`ClientShift`; returns the partition and the shifts."""
    in_range("rotation", rotation, 0.0, 180.0)
    if not contrast >= 1.0:
        raise ValueError(f"contrast must be >= 1 (factors in [1/contrast, contrast]), got "
                         f"{contrast}")
    nonnegative("noise", noise)
    x, y = _pool(x, y)
    if rotation > 0:
        _check_square(x.shape)
    rng = _rng(seed)
    part = iid_partition(x, y, num_clients=num_clients, seed=rng)
    shifts = client_shifts(num_clients, rotation=rotation, contrast=contrast, noise=noise,
                           rng=rng)
    xs = [apply_shift(xi, s, rng) for xi, s in zip(part.xs, shifts)]
    return Partition(xs, part.ys, part.client_classes), shifts


def _check_square(shape: tuple[int, ...]) -> None:
    if len(shape) < 3 or shape[-1] != shape[-2]:
        raise ValueError(f"feature-shift rotation needs square images [C, H, H], got features "
                         f"{list(shape[1:])} (use rotation 0 for other data)")
