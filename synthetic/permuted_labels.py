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

:func:`permuted_label_large_test` draws ``per_client`` further samples of every client from
that client's own distribution (its clusters, uniform over them, its σ_i) from a separate
stream ``default_rng([seed, LARGE_TEST_STREAM])`` — a low-noise test sample for benchmarks;
the federation itself is unchanged by it (the generator is replayed, not advanced).

Randomness from ``numpy.random.default_rng(seed)`` only; same seed ⇒ same federation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from pfl_theory.validation import in_range, positive, positive_int

__all__ = ["permuted_label_federation", "permuted_label_large_test", "LARGE_TEST",
           "LARGE_TEST_STREAM"]

LARGE_TEST, LARGE_TEST_STREAM = 1000, 7919  # default per-client size and rng stream of the large test


def _draw(num_clients, num_clusters, classes_per_client, dim, size_range, separation, noise,
          permuted, seed):
    """The generator (module docstring), validated: ``(means [K, dim], per-client cluster
    sets, per-client label maps σ_i, xs, ys)`` — the draws in their original order, so the
    federation of a seed never changes."""
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
    clusters, sigmas, xs, ys = [], [], [], []
    for i in range(n):
        clusters.append(rng.choice(k, size=c, replace=False))
        sigmas.append(rng.permutation(k) if i < n_perm else np.arange(k))
        m = int(rng.integers(lo, hi + 1))
        z = clusters[i][rng.integers(0, c, size=m)]
        xs.append(means[z] + sd * rng.normal(size=(m, dim)))
        ys.append(sigmas[i][z].astype(np.int64))
    return means, clusters, sigmas, xs, ys


def permuted_label_federation(*, num_clients: int = 20, num_clusters: int = 10,
                              classes_per_client: int = 5, dim: int = 20,
                              size_range: Sequence[int] = (60, 150), separation: float = 1.0,
                              noise: float = 1.0, permuted: float = 1.0, seed: int = 0,
                              train_fraction: float = 0.75, device=None, dtype=None):
    """The planted federation described in the module docstring (a
    :class:`~synthetic.federation.Federation` with ``num_clusters`` classes)."""
    from synthetic.federation import Federation

    _, _, _, xs, ys = _draw(num_clients, num_clusters, classes_per_client, dim, size_range,
                            separation, noise, permuted, seed)
    k = num_clusters
    return Federation.from_client_arrays(xs, ys, num_classes=k, train_fraction=train_fraction,
                                         seed=seed, device=device, dtype=dtype,
                                         name=f"permuted-labels(K={k},c={classes_per_client},seed={seed})")


def permuted_label_large_test(*, per_client: int = LARGE_TEST, num_clients: int = 20,
                              num_clusters: int = 10, classes_per_client: int = 5, dim: int = 20,
                              size_range: Sequence[int] = (60, 150), separation: float = 1.0,
                              noise: float = 1.0, permuted: float = 1.0, seed: int = 0,
                              device=None, dtype=None):
    """``per_client`` fresh samples of every client of the federation with the same arguments
    (module docstring), as a :class:`~synthetic.federation.Split` in client order: client i's
    cluster c uniform over its ``classes_per_client`` clusters, x = μ_c + noise·N(0, I),
    y = σ_i(c), drawn from ``default_rng([seed, LARGE_TEST_STREAM])``.  ``dtype`` defaults to
    float32, ``device`` as :func:`synthetic.federation.resolve_device`."""
    from synthetic.federation import Split, resolve_device

    per_client = positive_int("per_client", per_client)
    means, clusters, sigmas, _, _ = _draw(num_clients, num_clusters, classes_per_client, dim,
                                          size_range, separation, noise, permuted, seed)
    rng = np.random.default_rng([seed, LARGE_TEST_STREAM])
    xs, ys = [], []
    for cl, sigma in zip(clusters, sigmas):
        z = cl[rng.integers(0, len(cl), size=per_client)]
        xs.append(means[z] + noise * rng.normal(size=(per_client, means.shape[1])))
        ys.append(sigma[z].astype(np.int64))
    dev, n = resolve_device(device), len(clusters)
    return Split(torch.as_tensor(np.concatenate(xs), dtype=dtype or torch.float32).to(dev),
                 torch.as_tensor(np.concatenate(ys)).to(dev),
                 (torch.arange(n) * per_client).to(dev),
                 torch.full((n,), per_client, dtype=torch.long).to(dev))
