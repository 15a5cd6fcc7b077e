"""A planted "shared representation, personal heads" federation with label skew.

The setting decoupling methods (FedRep, FedPer, LG-FedAvg, FedBABU, PPFE) assume: a
representation useful to every client plus a client-specific prediction rule.  Planted here
as (toolkit construction, not from a paper):

* K latent clusters with shared means μ_c ~ N(0, separation² I_dim) (once);
* client i holds ``classes_per_client`` of the K clusters (label skew, chosen uniformly) and
  a size n_i uniform in ``size_range``; a sample of cluster c is x = μ_c + noise·N(0, I);
* its label is y = σ_i(c), where σ_i is a uniformly random permutation of {0, …, K−1}
  for a fraction ``permuted`` of the clients (the identity for the others) — so one global
  classifier cannot fit all clients, but a shared cluster representation plus a personal
  head can (Bayes accuracy depends only on the cluster overlap, ``noise / separation``).

Randomness from ``numpy.random.default_rng(seed)`` only; same seed ⇒ same federation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from pfl_theory.validation import in_range, positive, positive_int


def permuted_label_federation(*, num_clients: int = 20, num_clusters: int = 10,
                              classes_per_client: int = 5, dim: int = 20,
                              size_range: Sequence[int] = (60, 150), separation: float = 1.0,
                              noise: float = 1.0, permuted: float = 1.0, seed: int = 0,
                              train_fraction: float = 0.75, device=None, dtype=None):
    """The planted federation described in the module docstring (a
    :class:`~synthetic.federation.Federation` with ``num_clusters`` classes)."""
    from synthetic.federation import Federation

    n = positive_int("num_clients", num_clients)
    k = positive_int("num_clusters", num_clusters, minimum=2)
    c = positive_int("classes_per_client", classes_per_client)
    if c > k:
        raise ValueError(f"classes_per_client={c} > num_clusters={k}")
    dim = positive_int("dim", dim)
    lo, hi = (positive_int("size_range[0]", size_range[0], minimum=2),
              positive_int("size_range[1]", size_range[1], minimum=2))
    if lo > hi:
        raise ValueError(f"size_range must satisfy lo <= hi, got {tuple(size_range)}")
    sep, sd = positive("separation", separation), positive("noise", noise)
    frac = in_range("permuted", permuted, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    means = sep * rng.normal(size=(k, dim))
    n_perm = int(round(frac * n))
    xs, ys = [], []
    for i in range(n):
        clusters = rng.choice(k, size=c, replace=False)
        sigma = rng.permutation(k) if i < n_perm else np.arange(k)
        m = int(rng.integers(lo, hi + 1))
        z = clusters[rng.integers(0, c, size=m)]
        xs.append(means[z] + sd * rng.normal(size=(m, dim)))
        ys.append(sigma[z].astype(np.int64))
    return Federation.from_client_arrays(xs, ys, num_classes=k, train_fraction=train_fraction,
                                         seed=seed, device=device, dtype=dtype,
                                         name=f"permuted-labels(K={k},c={c},seed={seed})")
