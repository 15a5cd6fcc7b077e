"""verification.selection.k_data: planted federations of the K-selection benchmark."""

import dataclasses

import numpy as np
import pytest
import torch

from verification.selection.k_data import (SelectionCase, context_counts, large_test_split,
                                         make_case_federation, split_folds)


@pytest.mark.parametrize("n, k0", [(20, 4), (20, 8), (50, 7), (200, 8), (3, 3)])
def test_context_counts(n, k0):
    eq = context_counts(n, k0, "equal")
    assert eq.sum() == n and eq.max() - eq.min() <= 1
    un = context_counts(n, k0, "unequal")
    assert un.sum() == n and un.min() >= 1 and un[0] == un.max()
    if n >= 4 * k0:
        assert un[0] >= 2 * un[-1]  # "very unequal"
    assert context_counts(20, 4, "unequal").tolist() == [12, 5, 2, 1]


@pytest.mark.parametrize("kind", ["label", "feature"])
def test_make_case_federation(kind):
    case = SelectionCase(kind, 12, 3, "unequal", "hard", seed=5)
    fed, assign = make_case_federation(case)
    assert fed.num_clients == 12
    assert sorted(np.bincount(assign).tolist()) == sorted(context_counts(12, 3, "unequal").tolist())
    total = fed.train.counts + fed.test.counts
    assert int(total.min()) >= 40 and int(total.max()) <= 80
    if kind == "label":  # a client's labels come from its context's 4 classes
        for i in range(12):
            off, cnt = int(fed.train.offsets[i]), int(fed.train.counts[i])
            assert len(set(fed.train.y[off:off + cnt].tolist())) <= 4
    again, _ = make_case_federation(case)
    assert torch.equal(again.train.x, fed.train.x)  # deterministic


# sums of the training/test features and training labels of the two cases above, measured
# before large_test_split was added: the benchmark's training data must never change
_FINGERPRINT = {"label": (-238.86730512441167, -144.71230970594553, 1627),
                "feature": (-372.10737944357794, -108.0565200422036, 2427)}


@pytest.mark.parametrize("kind", ["label", "feature"])
def test_large_test_split_draws_each_clients_distribution(kind):
    case = SelectionCase(kind, 12, 3, "unequal", "hard", seed=5)
    fed, assign = make_case_federation(case)
    tr, te, ys = _FINGERPRINT[kind]
    assert float(fed.train.x.sum()) == pytest.approx(tr, rel=1e-12, abs=1e-9)
    assert float(fed.test.x.sum()) == pytest.approx(te, rel=1e-12, abs=1e-9)
    assert int(fed.train.y.sum()) == ys
    big = large_test_split(case, 500)
    assert big.num_clients == 12 and big.counts.tolist() == [500] * 12
    assert big.x.shape == (6000, 20) and big.x.dtype == torch.float64
    assert torch.equal(large_test_split(case, 500).x, big.x)  # deterministic
    assert not torch.equal(large_test_split(dataclasses.replace(case, seed=6), 500).x, big.x)
    mine = lambda s, i: (s.x[int(s.offsets[i]):int(s.offsets[i] + s.counts[i])],
                         s.y[int(s.offsets[i]):int(s.offsets[i] + s.counts[i])])
    for i in range(12):
        (x, y), (_, by) = mine(fed.train, i), mine(big, i)
        if kind == "label":  # same classes as the client's context (4 per context, hard)
            ctx = set(by.tolist())
            assert set(y.tolist()) <= ctx and len(ctx) <= 4
        else:  # all classes, shifted by the context: the client's training data is nearest
            # (class-mean distance, summed over classes) to its own context's large sample
            # (shift δ = 0.4 per coordinate: ≈ 6.4 per class against ≈ 5 ± 1.6 of noise)
            def dist(j):
                bxj, byj = mine(big, j)
                return sum(float(((x[y == c].mean(0) - bxj[byj == c].mean(0)) ** 2).sum())
                           for c in set(y.tolist()))
            first = {int(assign[j]): j for j in range(12)}
            assert min(first, key=lambda k: dist(first[k])) == assign[i]
    j = [i for i in range(12) if assign[i] == assign[0]]  # same context ⇒ same class set
    if kind == "label":
        assert all(set(mine(big, i)[1].tolist()) == set(mine(big, 0)[1].tolist()) for i in j)
    with pytest.raises(ValueError, match="per_client"):
        large_test_split(case, 0)


def test_split_folds_partition_training_data():
    fed, _ = make_case_federation(SelectionCase("label", 6, 2, "equal", "easy"))
    seen = {i: [] for i in range(6)}
    for f in range(3):
        v = split_folds(fed, folds=3, fold=f, seed=1)
        assert torch.equal(v.train.counts + v.test.counts, fed.train.counts)
        for i in range(6):
            off, cnt = int(v.test.offsets[i]), int(v.test.counts[i])
            seen[i] += [tuple(r) for r in v.test.x[off:off + cnt].tolist()]
    for i in range(6):  # the validation chunks tile each client's training data
        off, cnt = int(fed.train.offsets[i]), int(fed.train.counts[i])
        assert sorted(seen[i]) == sorted(tuple(r) for r in fed.train.x[off:off + cnt].tolist())


def test_validation():
    with pytest.raises(ValueError, match="kind"):
        SelectionCase("other", 10, 2, "equal", "easy")
    with pytest.raises(ValueError, match="k0"):
        SelectionCase("label", 3, 4, "equal", "easy")
    with pytest.raises(ValueError, match="sizes"):
        context_counts(10, 2, "skewed")
    fed, _ = make_case_federation(SelectionCase("label", 4, 2, "equal", "easy"))
    with pytest.raises(ValueError, match="fold"):
        split_folds(fed, folds=2, fold=2)
