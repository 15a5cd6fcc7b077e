"""verification.selection_data: planted federations of the K-selection benchmark."""

import numpy as np
import pytest
import torch

from verification.selection_data import (SelectionCase, context_counts, make_case_federation,
                                         split_folds)


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
