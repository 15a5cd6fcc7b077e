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
script used 0.9 — a parameter).
"""

from __future__ import annotations

import functools

import numpy as np

from pfl_theory.threads import single_blas_thread
from pfl_theory.validation import nonnegative, positive_int


def generate(alpha: float, beta: float, *, iid: bool = False, num_clients: int = 100,
             dim: int = 60, num_classes: int = 10, size_multiplier: int = 5,
             seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Draw Synthetic(α, β): per-client features ``xs[i]`` (float64 ``[n_i, dim]``) and
    labels ``ys[i]`` (int64 ``[n_i]``), in generation order, unshuffled.

    ``alpha`` controls how much client models differ, ``beta`` how much client feature
    distributions differ (both standard deviations, ``>= 0``).  The last few draws are
    memoised (the arrays returned are fresh copies).
    """
    xs, ys = _generate(nonnegative("alpha", alpha), nonnegative("beta", beta), bool(iid),
                       positive_int("num_clients", num_clients), positive_int("dim", dim),
                       positive_int("num_classes", num_classes, minimum=2),
                       positive_int("size_multiplier", size_multiplier), int(seed))
    return [x.copy() for x in xs], [y.copy() for y in ys]


@functools.lru_cache(maxsize=4)
def _generate(alpha: float, beta: float, iid: bool, num_clients: int, dim: int,
              num_classes: int, size_multiplier: int, seed: int):
    # one BLAS thread: multivariate_normal's SVD of a 60×60 matrix is otherwise slowed
    # many-fold by thread contention; the draws are identical either way
    with single_blas_thread():
        return _draw(alpha, beta, iid, num_clients, dim, num_classes, size_multiplier, seed)


def _draw(alpha: float, beta: float, iid: bool, num_clients: int, dim: int,
          num_classes: int, size_multiplier: int, seed: int):
    beta = nonnegative("beta", beta)
    n_clients = positive_int("num_clients", num_clients)
    dim = positive_int("dim", dim)
    n_classes = positive_int("num_classes", num_classes, minimum=2)
    mult = positive_int("size_multiplier", size_multiplier)

    rng = np.random.RandomState(seed)
    sizes = (rng.lognormal(4, 2, n_clients).astype(int) + 50) * mult
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
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for i in range(n_clients):
        w = rng.normal(mean_w[i], 1, (dim, n_classes))
        b = rng.normal(mean_b[i], 1, n_classes)
        if iid:
            w, b = w_global, b_global
        x = rng.multivariate_normal(mean_x[i], sigma, sizes[i])
        xs.append(x)
        ys.append(np.argmax(x @ w + b, axis=1).astype(np.int64))
    return tuple(xs), tuple(ys)


def federation(alpha: float = 0.5, beta: float = 0.5, *, iid: bool = False,
               num_clients: int = 100, dim: int = 60, num_classes: int = 10,
               size_multiplier: int = 5, seed: int = 0, train_fraction: float = 0.75,
               max_client_size: int | None = None, device=None, dtype=None):
    """Synthetic(α, β) as a :class:`~synthetic.federation.Federation`.

    ``max_client_size`` (optional) truncates each client to its first ``n`` samples after
    the seeded shuffle (used by benchmarks at large N; ``None`` keeps the paper's sizes).
    """
    from synthetic.federation import Federation

    xs, ys = generate(alpha, beta, iid=iid, num_clients=num_clients, dim=dim,
                      num_classes=num_classes, size_multiplier=size_multiplier, seed=seed)
    return Federation.from_client_arrays(
        xs, ys, num_classes=num_classes, train_fraction=train_fraction, seed=seed,
        max_client_size=max_client_size, device=device, dtype=dtype,
        name=f"synthetic({alpha},{beta}{',iid' if iid else ''})")
