"""FedProx Synthetic(α, β) data, seed-compatible with the reference generator.

Li et al., *Federated Optimization in Heterogeneous Networks* (FedProx, MLSys 2020)
introduced the generator; pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020, §5 and docs/formulas.md
§B.7) uses Synthetic(0.5, 0.5) with 60-dim inputs, 10 classes, N = 100 clients and sizes
in [250, 25810].  :func:`generate` draws *in exactly the order of the reference script*
(one legacy ``numpy.random.RandomState(seed)``), so ``seed=0`` reproduces that dataset
draw for draw:

1. sizes ``n = (lognormal(4, 2, N).astype(int) + 50) * size_multiplier``;
2. ``mean_W = normal(0, alpha, N)``; ``mean_b = mean_W`` (no draw);
3. ``B = normal(0, beta, N)``;
4. ``Sigma = diag(np.power(j + 1, -1.2))`` (no draw; numpy's ``power``, as the script —
   Python's ``**`` differs in the last bit for some ``j``, which moves features by ~1e-15);
5. non-iid: ``mean_x[i] = normal(B[i], 1, dim)`` per client; iid: ``B[i] * ones`` (no draw);
6. iid only: ``W_global = normal(0, 1, (dim, C))`` then ``b_global = normal(0, 1, C)``;
7. per client: ``W = normal(mean_W[i], 1, (dim, C))``, ``b = normal(mean_b[i], 1, C)``
   (drawn even when iid, then replaced by the global ones),
   ``x = multivariate_normal(mean_x[i], Sigma, n[i])``, ``y = argmax(x @ W + b)``.

:func:`federation` turns the draw into a :class:`~synthetic.federation.Federation`
(seeded per-client shuffle, train fraction 0.75 as in the papers; the public pFedMe
script used 0.9 — a parameter), writing each client into the flat tensors as it is drawn:
the memory used is the federation plus one client.

Large N: ``max_client_size=m`` applies the cap *while drawing* — client ``i`` draws
``min(n_i, m)`` samples (its sizes, means and model are drawn as above), so memory and time
scale with what is kept.  Every client's samples are still i.i.d. from its own Gaussian,
but the shared random stream then differs from an uncapped draw after the first capped
client.  :func:`auto_client_cap` picks the largest cap whose features fit a memory budget
(``pflt run``'s default ``--max-client-size auto``).  Without a cap the draw is the
reference one, bit for bit (``tests/synthetic/test_fedprox.py``).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from pfl_theory.threads import single_blas_thread
from pfl_theory.validation import nonnegative, positive_int

#: feature bytes that ``max_client_size="auto"`` allows (float32): 1 GiB
AUTO_BUDGET_BYTES = 1 << 30


def client_sizes(num_clients: int = 100, *, size_multiplier: int = 5, seed: int = 0
                 ) -> np.ndarray:
    """The reference sizes ``n_i`` (the script's first draw), before any cap."""
    rng = np.random.RandomState(int(seed))
    return (rng.lognormal(4, 2, positive_int("num_clients", num_clients)).astype(int) + 50) \
        * positive_int("size_multiplier", size_multiplier)


def auto_client_cap(num_clients: int = 100, *, dim: int = 60, size_multiplier: int = 5,
                    seed: int = 0, budget_bytes: int = AUTO_BUDGET_BYTES, itemsize: int = 4
                    ) -> int | None:
    """``None`` when all clients' features fit ``budget_bytes`` (``itemsize`` bytes per
    value), else the largest per-client cap ``m`` with ``Σ min(n_i, m) · dim · itemsize ≤
    budget_bytes`` (at least 2).  Uses only the sizes draw."""
    sizes = client_sizes(num_clients, size_multiplier=size_multiplier, seed=seed)
    rows = budget_bytes // (positive_int("dim", dim) * itemsize)
    if sizes.sum() <= rows:
        return None
    lo, hi = 2, int(sizes.max())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if np.minimum(sizes, mid).sum() <= rows else (lo, mid - 1)
    return lo


def generate(alpha: float, beta: float, *, iid: bool = False, num_clients: int = 100,
             dim: int = 60, num_classes: int = 10, size_multiplier: int = 5,
             seed: int = 0, max_client_size: int | None = None
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Draw Synthetic(α, β): per-client features ``xs[i]`` (float64 ``[n_i, dim]``) and
    labels ``ys[i]`` (int64 ``[n_i]``), in generation order, unshuffled.

    ``alpha`` controls how much client models differ, ``beta`` how much client feature
    distributions differ (both standard deviations, ``>= 0``); ``max_client_size`` caps
    each client while drawing (module doc).
    """
    sizes, clients = draw(alpha, beta, iid=iid, num_clients=num_clients, dim=dim,
                          num_classes=num_classes, size_multiplier=size_multiplier, seed=seed,
                          max_client_size=max_client_size)
    xs, ys = [], []
    for x, y in clients:
        xs.append(x)
        ys.append(y)
    return xs, ys


def draw(alpha: float, beta: float, *, iid: bool = False, num_clients: int = 100,
         dim: int = 60, num_classes: int = 10, size_multiplier: int = 5, seed: int = 0,
         max_client_size: int | None = None
         ) -> tuple[np.ndarray, Iterator[tuple[np.ndarray, np.ndarray]]]:
    """``(sizes, clients)``: the (capped) client sizes and an iterator drawing client
    after client ``(x_i, y_i)`` in the reference order (module doc)."""
    alpha, beta = nonnegative("alpha", alpha), nonnegative("beta", beta)
    dim = positive_int("dim", dim)
    n_classes = positive_int("num_classes", num_classes, minimum=2)
    sizes = client_sizes(num_clients, size_multiplier=size_multiplier, seed=seed)
    if max_client_size is not None:
        sizes = np.minimum(sizes, positive_int("max_client_size", max_client_size, minimum=2))
    rng = np.random.RandomState(int(seed))
    rng.lognormal(4, 2, sizes.size)  # the sizes draw, replayed on this stream
    return sizes, _clients(rng, sizes, alpha, beta, bool(iid), dim, n_classes)


def _clients(rng: np.random.RandomState, sizes: np.ndarray, alpha: float, beta: float,
             iid: bool, dim: int, n_classes: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    n_clients = sizes.size
    mean_w = rng.normal(0, alpha, n_clients)
    mean_b = mean_w
    b_feat = rng.normal(0, beta, n_clients)
    sigma = np.diag(np.power(np.arange(1, dim + 1), -1.2))  # not Python's ** (last-bit differences)
    mean_x = np.zeros((n_clients, dim))
    for i in range(n_clients):
        mean_x[i] = b_feat[i] * np.ones(dim) if iid else rng.normal(b_feat[i], 1, dim)
    if iid:
        w_global = rng.normal(0, 1, (dim, n_classes))
        b_global = rng.normal(0, 1, n_classes)
    # rng.multivariate_normal(mean, sigma, n) as numpy computes it — standard normals
    # [n, dim] times sqrt(s)·v from svd(sigma), plus the mean — with the SVD done once
    # (one BLAS thread: a 60×60 SVD is many-fold slower with contending threads)
    with single_blas_thread():
        _, s, v = np.linalg.svd(sigma)
        root = np.sqrt(s)[:, None] * v
        for i in range(n_clients):
            w = rng.normal(mean_w[i], 1, (dim, n_classes))
            b = rng.normal(mean_b[i], 1, n_classes)
            if iid:
                w, b = w_global, b_global
            x = np.dot(rng.standard_normal((int(sizes[i]), dim)), root)
            x += mean_x[i]
            yield x, np.argmax(x @ w + b, axis=1).astype(np.int64)


def federation(alpha: float = 0.5, beta: float = 0.5, *, iid: bool = False,
               num_clients: int = 100, dim: int = 60, num_classes: int = 10,
               size_multiplier: int = 5, seed: int = 0, train_fraction: float = 0.75,
               max_client_size: int | None = None, device=None, dtype=None):
    """Synthetic(α, β) as a :class:`~synthetic.federation.Federation`, built client by
    client as drawn (memory: the federation plus one client).

    ``max_client_size`` (optional) caps each client *while drawing* (module doc);
    ``None`` keeps the paper's sizes and the reference draw.
    """
    from synthetic.federation import Federation

    sizes, clients = draw(alpha, beta, iid=iid, num_clients=num_clients, dim=dim,
                          num_classes=num_classes, size_multiplier=size_multiplier, seed=seed,
                          max_client_size=max_client_size)
    from synthetic.degenerate import warn_if_degenerate

    cap = "" if max_client_size is None else f",max={max_client_size}"
    fed = Federation.from_client_stream(
        sizes, clients, feature_shape=(dim,), num_classes=num_classes,
        train_fraction=train_fraction, seed=seed, device=device, dtype=dtype,
        name=f"synthetic({alpha},{beta}{',iid' if iid else ''}{cap})")
    warn_if_degenerate(fed, hint="alpha or beta too large?")
    return fed
