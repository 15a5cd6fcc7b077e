"""Tests for synthetic/partition.py.  Pools carry their own sample index as the first feature
(exact in float32 below 2**24), so every client sample can be traced back to the pool: the
tests check class membership, sizes, reuse, alignment and determinism against that trace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from synthetic.partition import (dirichlet_partition, iid_partition, label_skew_partition,
                                 train_test_split_clients)

SETTINGS = settings(max_examples=25, deadline=None)


def make_pool(per_class, seed=0, width=3):
    """Pool with ``per_class[k]`` samples of label k, shuffled; x[:, 0] = pool index."""
    y = np.repeat(np.arange(len(per_class)), per_class)
    y = np.random.default_rng(seed).permutation(y)
    x = np.zeros((len(y), width), np.float64)
    x[:, 0] = np.arange(len(y))
    x[:, 1:] = y[:, None] * 10.0
    return x, y


def trace(part, x, y):
    """Pool indices of every client's samples; asserts arrays align with the pool."""
    idx = []
    for xi, yi in zip(part.xs, part.ys):
        assert xi.dtype == np.float32 and yi.dtype == np.int64 and len(xi) == len(yi)
        ii = xi[:, 0].astype(np.int64)
        np.testing.assert_array_equal(xi, x[ii].astype(np.float32))
        np.testing.assert_array_equal(yi, y[ii])
        idx.append(ii)
    return idx


def same(p, q):
    return all(np.array_equal(a, b) for a, b in zip(p.xs + p.ys + p.client_classes,
                                                    q.xs + q.ys + q.client_classes))


# ----------------------------------------------------------------------------- label skew
@SETTINGS
@given(n_classes=st.integers(2, 6), c=st.integers(1, 6), n_clients=st.integers(1, 8),
       lo=st.integers(0, 6), width=st.integers(0, 10), seed=st.integers(0, 2**31),
       cyclic=st.booleans())
def test_label_skew_properties(n_classes, c, n_clients, lo, width, seed, cyclic):
    c = min(c, n_classes)
    lo = c + lo
    hi = lo + width
    x, y = make_pool([n_clients * hi] * n_classes, seed=seed % 7)  # never exhausted
    kw = dict(num_clients=n_clients, classes_per_client=c, size_range=(lo, hi), seed=seed,
              class_assignment="cyclic" if cyclic else "random")
    part = label_skew_partition(x, y, **kw)
    idx = trace(part, x, y)
    assert len(part.xs) == n_clients
    for i, (yi, cls) in enumerate(zip(part.ys, part.client_classes)):
        assert lo <= len(yi) <= hi
        assert len(cls) == c and np.array_equal(np.unique(yi), cls)  # exactly c classes
        counts = np.bincount(yi)[cls]
        assert counts.max() - counts.min() <= 1  # even split over the assigned classes
        if cyclic:  # pFedMe's rule, by brute force
            assert sorted(cls.tolist()) == sorted({(i + j) % n_classes for j in range(c)})
    flat = np.concatenate(idx)
    assert len(np.unique(flat)) == len(flat)  # replace=False: no sample used twice
    assert same(part, label_skew_partition(x, y, **kw))  # same seed, same partition


def test_label_skew_paper_settings_and_replacement():
    x, y = make_pool([7000] * 10)  # MNIST-sized pool (70k, 10 classes)
    part = label_skew_partition(x, y, num_clients=20, classes_per_client=2,
                                size_range=(1165, 3834), seed=0, class_assignment="cyclic")
    sizes = np.array([len(v) for v in part.ys])
    assert sizes.min() >= 1165 and sizes.max() <= 3834
    assert len(np.unique(np.concatenate(trace(part, x, y)))) == sizes.sum()
    # CGPFL's N=40, 3 of 10 classes, n_i in [400, 5000] asks for more than 70k samples.
    kw = dict(num_clients=40, classes_per_client=3, size_range=(400, 5000), seed=0)
    with pytest.raises(ValueError, match="replace=True"):
        label_skew_partition(x, y, **kw)
    part = label_skew_partition(x, y, replace=True, **kw)
    trace(part, x, y)
    assert all(len(c) == 3 and np.array_equal(np.unique(v), c)
               for v, c in zip(part.ys, part.client_classes))


def test_label_skew_across_clients_never_repeats_a_sample_inside_a_client():
    # CGPFL's setting on a 60k pool: 108k rows requested, so samples repeat across clients
    # but never inside one.  mutation caught: rng.choice(..., replace=True) in this branch
    x, y = make_pool([6000] * 10)
    kw = dict(num_clients=40, classes_per_client=3, size_range=(400, 5000), seed=0,
              class_assignment="cyclic")
    part = label_skew_partition(x, y, replace="across-clients", **kw)
    idx = trace(part, x, y)
    assert all(len(np.unique(ii)) == len(ii) for ii in idx)
    assert sum(map(len, idx)) > len(np.unique(np.concatenate(idx)))   # reuse across clients
    assert all(np.array_equal(np.unique(v), c) for v, c in zip(part.ys, part.client_classes))
    # the old draw (with replacement) repeats inside clients: what the mode above excludes
    old = trace(label_skew_partition(x, y, replace=True, **kw), x, y)
    assert any(len(np.unique(ii)) < len(ii) for ii in old)
    # a client asking more of a class than the class holds is a one-line error
    with pytest.raises(ValueError, match="no sample twice in a client"):
        label_skew_partition(*make_pool([100] * 10), replace="across-clients", **kw)


def test_label_skew_sizes_are_uniform_on_the_range():
    x, y = make_pool([10] * 4)
    part = label_skew_partition(x, y, num_clients=3000, classes_per_client=2,
                                size_range=(2, 6), seed=3, replace=True)
    freq = np.bincount([len(v) for v in part.ys], minlength=7)[2:]
    # each of 5 values has count Binomial(3000, 1/5): mean 600, sd 22; 5 sd is a 1e-6 miss
    assert np.all(np.abs(freq - 600) < 5 * np.sqrt(3000 * 0.2 * 0.8)), freq
    # random assignment: each label is assigned to a client with probability c/C = 1/2
    hits = np.bincount(np.concatenate(part.client_classes), minlength=4)
    assert np.all(np.abs(hits - 1500) < 5 * np.sqrt(3000 * 0.25)), hits  # Binomial(3000, 1/2)


def test_label_skew_validation():
    x, y = make_pool([20] * 3)
    base = dict(num_clients=2, classes_per_client=2, size_range=(4, 6), seed=0)
    bad = [dict(classes_per_client=4), dict(classes_per_client=0), dict(num_clients=0),
           dict(size_range=(6, 4)), dict(size_range=(1, 6)), dict(size_range=(0, 3)),
           dict(size_range=5), dict(size_range=(2.5, 6)), dict(class_assignment="round-robin"),
           dict(seed=-1), dict(replace="yes")]
    for override in bad:
        with pytest.raises(ValueError):
            label_skew_partition(x, y, **{**base, **override})
    with pytest.raises(ValueError, match="exceeds the 3 classes"):
        label_skew_partition(x, y, **{**base, "classes_per_client": 4})
    for xx, yy in [(x[:-1], y), (x, y.astype(float)), (x, y[:, None]), (x, y - 1), (x[:0], y[:0])]:
        with pytest.raises(ValueError):
            label_skew_partition(xx, yy, **base)


# ----------------------------------------------------------------------------- Dirichlet
@SETTINGS
@given(n_classes=st.integers(1, 5), n_clients=st.integers(1, 6),
       alpha=st.floats(0.05, 100.0), seed=st.integers(0, 2**31), min_size=st.integers(0, 3))
def test_dirichlet_uses_every_sample_once(n_classes, n_clients, alpha, seed, min_size):
    per_class = [30 + 7 * k for k in range(n_classes)]
    x, y = make_pool(per_class, seed=seed % 5)
    kw = dict(num_clients=n_clients, alpha=alpha, seed=seed, min_size=min_size)
    part = dirichlet_partition(x, y, **kw)
    idx = trace(part, x, y)
    assert len(part.xs) == n_clients
    assert np.array_equal(np.sort(np.concatenate(idx)), np.arange(len(y)))  # a true partition
    per_client = np.array([np.bincount(v, minlength=n_classes) for v in part.ys])
    assert per_client.sum(axis=0).tolist() == per_class  # class counts add up over clients
    assert all(len(v) >= min_size for v in part.ys)
    assert all(np.array_equal(c, np.flatnonzero(row)) for c, row in zip(part.client_classes,
                                                                         per_client))
    assert same(part, dirichlet_partition(x, y, **kw))


def test_dirichlet_share_has_dirichlet_mean_and_variance():
    """Client 0's share of class 0 is Beta(α, (N-1)α) up to multinomial noise: mean 1/N,
    variance (1/N)(1-1/N)/(Nα+1) + E[p(1-p)]/n_k."""
    n_clients, alpha, n_k, reps = 4, 0.5, 1000, 1500
    x, y = make_pool([n_k, 10])
    rng = np.random.default_rng(11)
    share = []
    for _ in range(reps):
        part = dirichlet_partition(x, y, num_clients=n_clients, alpha=alpha, seed=rng, min_size=0)
        share.append(np.sum(part.ys[0] == 0) / n_k)
    share = np.array(share)
    mean = 1 / n_clients
    beta_var = mean * (1 - mean) / (n_clients * alpha + 1)
    var = beta_var + (mean * (1 - mean) - beta_var) / n_k  # + multinomial noise E[p(1-p)]/n_k
    # 5 standard errors of a mean of `reps` draws
    assert abs(share.mean() - mean) < 5 * np.sqrt(var / reps)
    # Beta(0.5, 1.5) has kurtosis ~ 5.4: SE of the sample variance ~ var*sqrt(4.4/reps) = 5.4%;
    # 20% separates the right α from α·N (variance 0.047 → 0.0135) or α/N (→ 0.125)
    assert abs(share.var(ddof=1) / var - 1) < 0.20


def test_dirichlet_alpha_controls_skew():
    x, y = make_pool([200] * 10)
    small = dirichlet_partition(x, y, num_clients=10, alpha=0.01, seed=0, min_size=0)
    large = dirichlet_partition(x, y, num_clients=10, alpha=1e4, seed=0, min_size=0)
    # α=0.01: each class lands almost entirely on one client (P(largest share < 0.9) is tiny);
    # α=1e4: every client holds every class, counts ~ 20 ± 4.5 (Multinomial(200, ≈1/10))
    assert np.mean([len(c) for c in small.client_classes]) < 3
    counts = np.array([np.bincount(v, minlength=10) for v in large.ys])
    assert np.all(np.abs(counts - 20) < 5 * np.sqrt(200 * 0.1 * 0.9))


def test_dirichlet_validation_and_retry_limit():
    x, y = make_pool([5, 5])
    for bad in [dict(alpha=0.0), dict(alpha=-1.0), dict(alpha=float("nan")),
                dict(alpha=float("inf")), dict(num_clients=0), dict(min_size=-1),
                dict(max_tries=0), dict(min_size=3, num_clients=4)]:
        with pytest.raises(ValueError):
            dirichlet_partition(x, y, **{"num_clients": 2, "alpha": 1.0, "seed": 0, **bad})
    with pytest.raises(ValueError, match="raise alpha"):  # 10 samples, 5 clients, each >= 2
        dirichlet_partition(x, y, num_clients=5, alpha=0.01, seed=0, min_size=2, max_tries=3)


# ----------------------------------------------------------------------------- IID
@SETTINGS
@given(n=st.integers(1, 60), n_clients=st.integers(1, 10), seed=st.integers(0, 2**31))
def test_iid_whole_pool(n, n_clients, seed):
    x, y = make_pool([n, 3])
    n_clients = min(n_clients, n + 3)  # every client gets at least one sample
    part = iid_partition(x, y, num_clients=n_clients, seed=seed)
    idx = trace(part, x, y)
    sizes = [len(v) for v in idx]
    assert max(sizes) - min(sizes) <= 1
    assert np.array_equal(np.sort(np.concatenate(idx)), np.arange(len(y)))
    assert same(part, iid_partition(x, y, num_clients=n_clients, seed=seed))


def test_iid_fixed_size_and_class_balance():
    x, y = make_pool([1000] * 10)
    part = iid_partition(x, y, num_clients=10, seed=5, samples_per_client=900)
    idx = np.concatenate(trace(part, x, y))
    assert [len(v) for v in part.ys] == [900] * 10 and len(np.unique(idx)) == 9000
    counts = np.array([np.bincount(v, minlength=10) for v in part.ys])
    # each count is hypergeometric: mean 90, sd sqrt(900*0.1*0.9*(10000-900)/9999) ≈ 8.6;
    # 5 sd over 100 cells misses with probability < 1e-4
    sd = np.sqrt(900 * 0.1 * 0.9 * (10000 - 900) / 9999)
    assert np.all(np.abs(counts - 90) < 5 * sd), counts
    with pytest.raises(ValueError, match="needs 10010"):
        iid_partition(x, y, num_clients=10, seed=0, samples_per_client=1001)
    with pytest.raises(ValueError):
        iid_partition(x, y, num_clients=0, seed=0)


# ----------------------------------------------------------------------------- 75/25 split
@SETTINGS
@given(sizes=st.lists(st.integers(2, 40), min_size=1, max_size=6), seed=st.integers(0, 2**31),
       frac=st.sampled_from([0.75, 0.5, 0.6]))
def test_train_test_split(sizes, seed, frac):
    x, y = make_pool([sum(sizes)])
    groups = np.split(np.arange(len(y)), np.cumsum(sizes)[:-1])
    xs, ys = [x[g].astype(np.float32) for g in groups], [y[g] for g in groups]
    out = train_test_split_clients(xs, ys, seed=seed, train_fraction=frac)
    xtr, ytr, xte, yte = out
    for g, a, b, c, d, n in zip(groups, xtr, ytr, xte, yte, sizes):
        n_train = int(frac * n)  # pFedMe's floor rule; >= 1 and < n since n >= 2
        assert len(a) == len(b) == n_train and len(c) == len(d) == n - n_train
        both = np.concatenate([a[:, 0], c[:, 0]]).astype(np.int64)
        assert np.array_equal(np.sort(both), g)  # disjoint, together the client's data
        assert np.array_equal(b, y[a[:, 0].astype(np.int64)])
    again = train_test_split_clients(xs, ys, seed=seed, train_fraction=frac)
    assert all(np.array_equal(p, q) for u, v in zip(out, again) for p, q in zip(u, v))


def test_train_test_split_validation():
    xs, ys = [np.zeros((4, 2), np.float32)], [np.zeros(4, np.int64)]
    for frac in (0.0, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError):
            train_test_split_clients(xs, ys, seed=0, train_fraction=frac)
    with pytest.raises(ValueError, match="empty"):
        train_test_split_clients([np.zeros((1, 2))], [np.zeros(1, np.int64)], seed=0)
    with pytest.raises(ValueError):
        train_test_split_clients(xs, ys + ys, seed=0)
    with pytest.raises(ValueError):
        train_test_split_clients([np.zeros((3, 2))], [np.zeros(4, np.int64)], seed=0)
