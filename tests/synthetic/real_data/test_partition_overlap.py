"""synthetic/real_data/partition_overlap.py: reuse counted by pixel content, and no paper
partition puts a client's training image in its own test split (real FMNIST when present)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from synthetic.federation import Federation
from synthetic.real_data.partition_overlap import partition_reuse, reuse_line
from synthetic.sources import DataSpec, build_federation

FMNIST = "/usr/share/datasets/fashion-mnist"


def _fed(xs, ys):
    # train_fraction 0.5 on 4 rows: rows 0-1 of the shuffled client are train, 2-3 test
    return Federation.from_client_arrays(xs, ys, num_classes=2, train_fraction=0.5, seed=0)


def test_counts_by_hand_on_a_small_synthetic_case():
    rng = np.random.default_rng(0)
    img = rng.random((6, 3, 2)).astype(np.float32)   # 6 distinct images
    y = np.zeros(4, np.int64)
    # client 0: images 0-3; client 1: images 2, 3, 4, 5 (2 and 3 shared across clients)
    fed = _fed([img[[0, 1, 2, 3]], img[[2, 3, 4, 5]]], [y, y])
    r = partition_reuse(fed)
    assert r["rows"] == 8 and r["distinct_images"] == 6
    assert r["images_in_several_clients"] == 2
    assert r["test_rows_in_own_train"] == 0 and r["rows_repeated_in_client"] == 0
    # a client holding one image twice: caught wherever the split puts the pair; split
    # across train/test it is also a test row in its own training split
    for seed in range(6):
        dup = Federation.from_client_arrays([img[[0, 0, 1, 2]], img[[3, 4, 5, 1]]], [y, y],
                                            num_classes=2, train_fraction=0.5, seed=seed)
        d = partition_reuse(dup)
        assert d["rows_repeated_in_client"] == 1
        assert d["test_rows_in_own_train"] == _own_test_rows(dup)
    assert "held by several clients" in reuse_line(d)
    assert any(partition_reuse(Federation.from_client_arrays(
        [img[[0, 0, 1, 2]], img[[3, 4, 5, 1]]], [y, y], num_classes=2, train_fraction=0.5,
        seed=s))["test_rows_in_own_train"] == 1 for s in range(6))   # some seed splits it


def _own_test_rows(fed):
    """Independent count: test rows equal (numpy, not digests) to a row of the same client's
    training split."""
    total = 0
    for i in range(fed.num_clients):
        rows = []
        for s in (fed.train, fed.test):
            o, n = int(s.offsets[i]), int(s.counts[i])
            rows.append(s.x[o:o + n].reshape(n, -1).numpy())
        tr, te = rows
        total += sum(any(np.array_equal(t, u) for u in tr) for t in te)
    return total


def _fmnist_or_skip():
    if not os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        pytest.skip(f"real Fashion-MNIST not installed at {FMNIST}")
    return f"fmnist:{FMNIST}"


@pytest.mark.parametrize("paper, clients", [("cgpfl", 40), ("pfedme", 20), ("ppfe", 100),
                                            ("plgu", 100)])
def test_no_client_tests_on_its_own_training_images_real_fmnist(paper, clients):
    # mutation caught: CGPFL's former draw (with replacement within a class) gave 3,474
    # test rows of 26,630 that were in their own client's training split
    fed = build_federation(DataSpec(data=_fmnist_or_skip(), partition=paper,
                                    num_clients=clients, seed=0), device="cpu")
    r = partition_reuse(fed)
    assert r["test_rows_in_own_train"] == 0, r
    assert r["rows_repeated_in_client"] == 0, r
    if paper == "cgpfl":   # 40 x E[n] ~ 108k rows from 60k images: reuse is forced
        assert r["images_in_several_clients"] > 0 and r["rows"] > 60000
