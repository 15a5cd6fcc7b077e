"""The oracles' own k-means (verification/oracles/kmeans_plain.py) against the engine's
(pfl_theory.kmeans, pfl_theory.cgpfl.select_k): the same partitions from the same seeds,
by different code."""

from __future__ import annotations

import numpy as np
import pytest

from pfl_theory.cgpfl import select_k
from pfl_theory.kmeans import align_result, kmeans
from verification.oracles.kmeans_plain import aligned, plain_kmeans, plain_select_k


def _blobs(seed, k=3, per=6, d=4, spread=0.8):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (k, d))
    return np.vstack([c + spread * rng.standard_normal((per, d)) for c in centres])


@pytest.mark.parametrize("seed", range(6))
def test_plain_kmeans_equals_the_engines_on_the_same_seed(seed):
    x = _blobs(seed, spread=2.0)  # overlapping: Lloyd needs several updates
    for k in (2, 3, 4):
        lab, cen, inertia = plain_kmeans(x, k, restarts=3, seed=seed)
        ref = kmeans(x, k, restarts=3, seed=seed)
        assert np.array_equal(lab, ref.labels)
        assert inertia == pytest.approx(ref.inertia, rel=1e-12)
        old = cen[::-1] + 0.01
        assert np.array_equal(aligned(lab, cen, old), align_result(ref, old).labels)


@pytest.mark.parametrize("seed", range(4))
def test_plain_select_k_equals_the_engines(seed):
    x = _blobs(seed, k=3, per=5, d=3, spread=0.5)
    sizes = np.arange(15) + 20.0
    for mu in ("relative", 0.05):
        k_hat, lab = plain_select_k(x, sizes=sizes, k_max=5, restarts=3, seed=seed, mu=mu)
        ref = select_k(x, mu=mu, m=sizes, k_max=5, restarts=3, seed=seed)
        assert k_hat == ref.k_hat
        assert np.array_equal(lab, ref.clusterings[ref.k_hat - 1].labels)


def test_a_lloyd_defect_separates_them():
    import pfl_theory.kmeans as km

    x = _blobs(0, spread=2.0)
    orig = km._lloyd_batched
    try:
        km._lloyd_batched = lambda x_, w, c, max_iter: orig(x_, w, c, min(max_iter, 1))
        differs = any(not np.array_equal(plain_kmeans(x, k, restarts=1, seed=s)[0],
                                         kmeans(x, k, restarts=1, seed=s).labels)
                      for s in range(5) for k in (3, 4))
    finally:
        km._lloyd_batched = orig
    assert differs
