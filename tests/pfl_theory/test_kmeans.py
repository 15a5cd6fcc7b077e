"""Tests of pfl_theory.kmeans: brute-force optimum, scipy reference, Lloyd monotonicity,
determinism, degenerate cases (K=1, K=N, duplicates, empty clusters), weights, torch I/O,
Hungarian matching."""

import itertools
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.vq import kmeans2

from pfl_theory.kmeans import align_result, inertia, kmeans, lloyd, match_clusters

REL = 1e-12  # float64 rounding of sums of squares over <= 100 points


def brute_force_optimum(x: np.ndarray, k: int) -> float:
    """Minimum SSE over all partitions of the rows of x into k non-empty clusters."""
    best = np.inf
    for lab in itertools.product(range(k), repeat=len(x)):
        lab = np.array(lab)
        if len(set(lab.tolist())) < k:
            continue
        sse = 0.0
        for j in range(k):
            pts = x[lab == j]
            sse += float(((pts - pts.mean(0)) ** 2).sum())
        best = min(best, sse)
    return best


@pytest.mark.parametrize("case", range(6))
def test_matches_brute_force_optimum_small(case):
    rng = np.random.default_rng(100 + case)
    n, k = int(rng.integers(5, 8)), int(rng.integers(2, 4))
    x = rng.normal(size=(n, 2))
    opt = brute_force_optimum(x, k)
    res = kmeans(x, k, restarts=10, seed=case)
    assert res.inertia >= opt * (1 - REL)  # nothing beats the optimum
    assert res.inertia == pytest.approx(opt, rel=1e-9)  # 10 restarts find it on N <= 7


def test_hand_sized_golden_value():
    # two obvious pairs on a line: clusters {0, 1} and {10, 12}; SSE = 0.5 + 2 = 2.5
    x = np.array([[0.0], [1.0], [10.0], [12.0]])
    res = kmeans(x, 2, seed=3)
    assert res.inertia == pytest.approx(2.5, rel=REL)
    assert sorted(res.centers[:, 0].tolist()) == pytest.approx([0.5, 11.0])
    assert res.labels[0] == res.labels[1] != res.labels[2] == res.labels[3]


def test_lloyd_equals_scipy_kmeans2_from_same_init():
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(c, 0.7, size=(15, 3)) for c in (0.0, 3.0, 6.0)])
    init = x[[0, 20, 40, 5]]
    ours = lloyd(x, init, max_iter=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no empty cluster in scipy's run either
        cen, lab = kmeans2(x, init.copy(), iter=100, minit="matrix")
    np.testing.assert_array_equal(ours.labels, lab)
    np.testing.assert_allclose(ours.centers, cen, rtol=1e-12, atol=1e-12)


def test_best_of_restarts_not_worse_than_scipy_plusplus():
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.normal(c, 1.0, size=(20, 2)) for c in ((0, 0), (6, 0), (0, 6), (6, 6))])
    scipy_best = np.inf
    for s in range(5):
        cen, lab = kmeans2(x, 4, iter=100, minit="++", seed=s)
        scipy_best = min(scipy_best, inertia(x, lab, cen))
    ours = kmeans(x, 4, restarts=10, seed=0)
    assert ours.inertia <= scipy_best * (1 + REL)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 40), k=st.integers(1, 6), d=st.integers(1, 4))
def test_lloyd_never_increases_objective(seed, n, k, d):
    k = min(k, n)
    x = np.random.default_rng(seed).normal(size=(n, d))
    init = x[np.random.default_rng(seed + 1).choice(n, size=k, replace=False)]
    start = inertia(x, ((x[:, None] - init[None]) ** 2).sum(-1).argmin(1), init)
    res = lloyd(x, init, max_iter=50)
    hist = np.array((start,) + res.history)
    assert np.all(np.diff(hist) <= REL * hist[0] + 1e-300)
    assert res.inertia == pytest.approx(inertia(x, res.labels, res.centers), rel=REL)


def test_kmeans_history_monotone_and_reported_inertia_exact():
    x = np.random.default_rng(1).normal(size=(60, 5))
    res = kmeans(x, 5, restarts=4, seed=2)
    hist = np.array(res.history)
    assert np.all(np.diff(hist) <= REL * hist[0])
    assert res.inertia == pytest.approx(inertia(x, res.labels, res.centers), rel=REL)


def test_determinism_per_seed():
    x = np.random.default_rng(2).normal(size=(50, 3))
    a, b = kmeans(x, 4, seed=11), kmeans(x, 4, seed=11)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centers, b.centers)
    assert a.inertia == b.inertia


def test_k_equals_one_is_weighted_mean():
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(9, 2)), rng.uniform(0.5, 2.0, size=9)
    res = kmeans(x, 1, weights=w)
    mean = sum(wi * xi for wi, xi in zip(w, x)) / w.sum()
    np.testing.assert_allclose(res.centers[0], mean, rtol=1e-12)
    golden = sum(wi * float(((xi - mean) ** 2).sum()) for wi, xi in zip(w, x))
    assert res.inertia == pytest.approx(golden, rel=REL)
    assert np.all(res.labels == 0)


def test_k_equals_n_zero_inertia():
    x = np.random.default_rng(4).normal(size=(7, 3))
    res = kmeans(x, 7)
    assert res.inertia == 0.0
    assert sorted(res.labels.tolist()) == list(range(7))


def test_duplicates_with_k_equals_n_leave_documented_empty_clusters():
    x = np.array([[0.0, 0.0]] * 3 + [[5.0, 5.0]] * 2)
    res = kmeans(x, 5, seed=0)
    assert res.inertia == 0.0
    assert len(set(res.labels.tolist())) == 2  # only 2 distinct points -> 3 empty clusters
    assert np.all(np.isfinite(res.centers))


def test_empty_cluster_is_reseeded():
    x = np.concatenate([np.zeros((5, 1)), np.ones((5, 1)) * 10.0, [[11.0]]])
    init = np.array([[0.0], [10.0], [100.0]])  # the third centre attracts no point
    res = lloyd(x, init)
    assert len(set(res.labels.tolist())) == 3
    no_reseed = inertia(x, np.r_[np.zeros(5, int), np.ones(6, int)], np.array([[0.0], [10 + 1 / 6], [100]]))
    assert res.inertia < no_reseed


def test_integer_weights_equal_repeated_points():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(12, 2))
    w = rng.integers(1, 4, size=12)
    init = x[[0, 4, 8]]
    weighted = lloyd(x, init, weights=w.astype(float))
    repeated = lloyd(np.repeat(x, w, axis=0), init)
    np.testing.assert_allclose(weighted.centers, repeated.centers, rtol=1e-12)
    assert weighted.inertia == pytest.approx(repeated.inertia, rel=REL)


def test_torch_input_returns_torch_and_matches_numpy():
    x = np.random.default_rng(6).normal(size=(30, 4))
    a = kmeans(x, 3, seed=5)
    b = kmeans(torch.tensor(x, dtype=torch.float32), 3, seed=5)
    assert isinstance(b.labels, torch.Tensor) and b.centers.dtype == torch.float32
    c = kmeans(torch.tensor(x), 3, seed=5)
    np.testing.assert_array_equal(a.labels, c.labels.numpy())
    np.testing.assert_allclose(a.centers, c.centers.numpy(), rtol=1e-12)


def test_match_clusters_recovers_permutation_and_is_optimal():
    rng = np.random.default_rng(9)
    old = rng.normal(size=(5, 3))
    true = rng.permutation(5)
    new = old[true] + 0.01 * rng.normal(size=(5, 3))
    perm = match_clusters(old, new)
    np.testing.assert_array_equal(new[perm], new[np.argsort(true)])
    # brute force over all permutations for random (unstructured) centres
    a, b = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    p = match_clusters(a, b)
    brute = min(sum(((a[j] - b[q[j]]) ** 2).sum() for j in range(5)) for q in itertools.permutations(range(5)))
    assert sum(((a[j] - b[p[j]]) ** 2).sum() for j in range(5)) == pytest.approx(brute, rel=REL)


def test_align_result_relabels_consistently():
    x = np.concatenate([np.zeros((3, 1)), np.full((3, 1), 5.0), np.full((3, 1), 9.0)])
    res = kmeans(x, 3, seed=1)
    old = np.array([[9.0], [0.0], [5.0]])
    al = align_result(res, old)
    np.testing.assert_allclose(al.centers, old)
    np.testing.assert_array_equal(al.labels, [1, 1, 1, 2, 2, 2, 0, 0, 0])
    assert al.inertia == res.inertia


@pytest.mark.parametrize("kwargs, msg", [
    ({"k": 0}, "k must"), ({"k": 11}, "k must be <= N"), ({"k": 2, "restarts": 0}, "restarts"),
    ({"k": 2, "weights": -np.ones(10)}, "weights"), ({"k": 2, "weights": np.ones(3)}, "weights"),
    ({"k": 2, "seed": -1}, "seed"),
])
def test_bad_input(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        kmeans(np.zeros((10, 2)) + np.arange(10)[:, None], **kwargs)


def test_bad_points():
    with pytest.raises(ValueError, match="shape"):
        kmeans(np.zeros(5), 1)
    with pytest.raises(ValueError, match="NaN"):
        kmeans(np.array([[0.0], [np.nan]]), 1)
    with pytest.raises(ValueError, match="same shape"):
        match_clusters(np.zeros((2, 2)), np.zeros((3, 2)))


def test_large_problem_code_path_matches_small(monkeypatch):
    """The expansion/matmul path (used above restarts*N*k*d = 2e6) gives the same clustering."""
    import pfl_theory.kmeans as km

    x = np.random.default_rng(10).normal(size=(80, 6))
    small = kmeans(x, 4, seed=3)
    monkeypatch.setattr(km, "_DIFF_LIMIT", 0)
    monkeypatch.setattr(km, "_EXACT_LIMIT", 0)
    large = kmeans(x, 4, seed=3)
    np.testing.assert_array_equal(small.labels, large.labels)
    np.testing.assert_allclose(small.centers, large.centers, rtol=1e-12, atol=1e-14)
    assert large.inertia == pytest.approx(small.inertia, rel=1e-12)
    assert np.all(np.diff(large.history) <= 1e-12 * large.history[0])  # expansion rounding
