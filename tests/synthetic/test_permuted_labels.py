"""synthetic.permuted_labels: the planted label-skewed federation and its large test sample."""

import numpy as np
import pytest
import torch

from synthetic import permuted_labels as pl
from synthetic.permuted_labels import permuted_label_federation, permuted_label_large_test

GEN = dict(num_clients=6, num_clusters=5, classes_per_client=3, dim=4, size_range=(8, 20),
           permuted=0.5, noise=2.0, seed=7)


def _client(split, i):
    o, c = int(split.offsets[i]), int(split.counts[i])
    return split.x[o:o + c], split.y[o:o + c]


def test_federation_unchanged_fingerprint():
    # measured on the generator before the large test was added (commit 0f9d164): sums of the
    # training/test features (float64, so exact up to summation order: rel 1e-12) and labels,
    # and the per-client sizes — the benchmarks' training and own test data must never change
    fed = permuted_label_federation(**GEN, device="cpu", dtype=torch.float64)
    assert float(fed.train.x.sum()) == pytest.approx(-78.78951984584178, rel=1e-12)
    assert float(fed.test.x.sum()) == pytest.approx(-41.68033305037875, rel=1e-12)
    assert (int(fed.train.y.sum()), int(fed.test.y.sum())) == (108, 42)
    assert fed.train.counts.tolist() == [10, 11, 12, 9, 7, 11]
    assert fed.test.counts.tolist() == [4, 4, 4, 4, 3, 4]
    # drawing the large test does not advance or touch the federation's stream
    permuted_label_large_test(**GEN, per_client=50, device="cpu")
    again = permuted_label_federation(**GEN, device="cpu", dtype=torch.float64)
    assert torch.equal(again.train.x, fed.train.x) and torch.equal(again.test.y, fed.test.y)


def test_labels_follow_each_clients_permutation():
    fed = permuted_label_federation(**{**GEN, "permuted": 1.0}, device="cpu")
    for i in range(6):
        assert len(set(_client(fed.train, i)[1].tolist())) <= 3


def _drawn_from_own_distribution(fed, big, means, clusters, sigmas) -> bool:
    """Every large-test sample of client i has a label σ_i(c) of one of its clusters c, its
    labels and the client's training labels are the same set, and per label the large-test
    features average to μ_{σ_i⁻¹(y)} (the cluster the label was mapped from)."""
    for i in range(fed.num_clients):
        x, y = _client(big, i)
        allowed = {int(sigmas[i][c]) for c in clusters[i]}
        if set(y.tolist()) != allowed or not set(_client(fed.train, i)[1].tolist()) <= allowed:
            return False
        inverse = {int(sigmas[i][c]): int(c) for c in clusters[i]}
        for label, c in inverse.items():
            mean = x[y == label].double().mean(0).numpy()
            # noise 2, ≈ 200 samples per label: per-coordinate SE ≈ 0.14 (≈ 0.3 in distance,
            # dim 4); the cluster means are > 2 apart (asserted by the caller): safe margin
            if int(np.argmin(((means - mean) ** 2).sum(1))) != c:
                return False
    return True


def test_large_test_draws_each_clients_own_distribution():
    gen = {**GEN, "permuted": 0.5, "separation": 3.0}
    fed = permuted_label_federation(**gen, device="cpu")
    big = permuted_label_large_test(**gen, per_client=600, device="cpu")
    assert big.num_clients == 6 and big.counts.tolist() == [600] * 6
    assert big.offsets.tolist() == [600 * i for i in range(6)]
    assert big.x.shape == (3600, 4) and big.x.dtype == torch.float32
    assert big.y.dtype == torch.int64
    assert permuted_label_large_test(**gen, per_client=10, dtype=torch.float64).x.dtype == torch.float64
    means, clusters, sigmas, _, _ = pl._draw(**gen)   # the generator's population
    gaps = np.sqrt(((means[:, None] - means[None]) ** 2).sum(-1))[np.triu_indices(5, 1)]
    assert gaps.min() > 2.0
    assert any(not np.array_equal(s, np.arange(5)) for s in sigmas)  # some clients permuted
    assert _drawn_from_own_distribution(fed, big, means, clusters, sigmas)
    # deterministic; a different seed is a different sample
    assert torch.equal(permuted_label_large_test(**gen, per_client=600, device="cpu").x, big.x)
    other = permuted_label_large_test(**{**gen, "seed": 8}, per_client=600, device="cpu")
    assert not torch.equal(other.x, big.x)
    # mutations the check must catch: labels without the permutation (y = c), and the
    # samples of the wrong clients (client order rotated by one)
    unperm = [np.arange(5)] * 6
    assert not _drawn_from_own_distribution(fed, big, means, clusters, unperm)
    rolled = type(big)(torch.roll(big.x, 600, 0), torch.roll(big.y, 600, 0), big.offsets, big.counts)
    assert not _drawn_from_own_distribution(fed, rolled, means, clusters, sigmas)


def test_large_test_uses_its_own_stream():
    # client 0's sample replayed from default_rng([seed, LARGE_TEST_STREAM]) by hand: the
    # large test is a separate stream (not the federation's, which would reuse its draws)
    big = permuted_label_large_test(**GEN, per_client=30, device="cpu", dtype=torch.float64)
    means, clusters, sigmas, _, _ = pl._draw(separation=1.0, **GEN)
    rng = np.random.default_rng([GEN["seed"], pl.LARGE_TEST_STREAM])
    z = clusters[0][rng.integers(0, 3, size=30)]
    x = means[z] + GEN["noise"] * rng.normal(size=(30, 4))
    np.testing.assert_array_equal(big.x[:30].numpy(), x)
    np.testing.assert_array_equal(big.y[:30].numpy(), sigmas[0][z])


def test_bad_input():
    with pytest.raises(ValueError, match="per_client"):
        permuted_label_large_test(per_client=0)
    with pytest.raises(ValueError, match="classes_per_client"):
        permuted_label_large_test(num_clusters=3, classes_per_client=4)
    with pytest.raises(ValueError, match="size_range"):
        permuted_label_federation(size_range=(10, 5))
