"""Feature-shift partition (synthetic/feature_shift.py, ``--partition feature-shift``):
deterministic with the data seed, transforms differ across clients, labels are the IID
partition's, each transform does what it says (rotation = rot90 at 90°, contrast keeps the
mean and scales the spread, noise has its std), clear errors."""

import numpy as np
import pytest

from synthetic.feature_shift import ClientShift, apply_shift, feature_shift_partition
from synthetic.partition import iid_partition


@pytest.fixture(scope="module")
def pool():
    rng = np.random.default_rng(0)
    x = rng.random((120, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, 120)
    return x, y


def test_same_seed_same_partition_other_seed_other(pool):
    x, y = pool
    a, sa = feature_shift_partition(x, y, num_clients=5, seed=3)
    b, sb = feature_shift_partition(x, y, num_clients=5, seed=3)
    c, sc = feature_shift_partition(x, y, num_clients=5, seed=4)
    assert sa == sb and sa != sc
    assert all(np.array_equal(p, q) for p, q in zip(a.xs, b.xs))
    assert not all(np.array_equal(p, q) for p, q in zip(a.xs, c.xs) if p.shape == q.shape)


def test_labels_and_split_are_the_iid_partitions(pool):
    x, y = pool
    part, _ = feature_shift_partition(x, y, num_clients=5, seed=3)
    iid = iid_partition(x, y, num_clients=5, seed=3)
    assert all(np.array_equal(p, q) for p, q in zip(part.ys, iid.ys))
    # with every transform off, the inputs are the IID partition's too
    plain, _ = feature_shift_partition(x, y, num_clients=5, seed=3, rotation=0, contrast=1,
                                       noise=0)
    assert all(np.array_equal(p, q) for p, q in zip(plain.xs, iid.xs))
    assert not all(np.array_equal(p, q) for p, q in zip(part.xs, iid.xs))


def test_transforms_differ_across_clients(pool):
    x, y = pool
    _, shifts = feature_shift_partition(x, y, num_clients=6, seed=1, rotation=30, contrast=2,
                                        noise=0.2)
    for field, lo, hi in (("rotation", -30, 30), ("contrast", 0.5, 2), ("noise", 0, 0.2)):
        values = [getattr(s, field) for s in shifts]
        assert len(set(values)) == 6 and all(lo <= v <= hi for v in values), field
    # the same image through two clients' transforms (no noise) comes out different
    img = x[:1]
    a = apply_shift(img, shifts[0]._replace(noise=0.0), np.random.default_rng(0))
    b = apply_shift(img, shifts[1]._replace(noise=0.0), np.random.default_rng(0))
    assert np.abs(a - b).max() > 1e-3


def test_each_transform_does_what_it_says(pool):
    x, _ = pool
    rng = np.random.default_rng(0)
    quarter = apply_shift(x[:3], ClientShift(90.0, 1.0, 0.0), rng)
    # scipy's positive angle turns the image counter-clockwise (as displayed): np.rot90 k=1
    np.testing.assert_allclose(quarter, np.rot90(x[:3], 1, axes=(-2, -1)), atol=1e-6)
    strong = apply_shift(x[:3], ClientShift(0.0, 1.5, 0.0), rng).astype(np.float64)
    flat, out = x[:3].reshape(3, -1).astype(np.float64), strong.reshape(3, -1)
    np.testing.assert_allclose(out.mean(1), flat.mean(1), atol=1e-6)
    np.testing.assert_allclose(out.std(1), 1.5 * flat.std(1), rtol=1e-5)
    noisy = apply_shift(np.zeros((400, 1, 8, 8)), ClientShift(0.0, 1.0, 0.3), rng)
    # 25,600 N(0, 0.3²) draws: the sample std is within 2% of 0.3 (≈ 5 standard errors)
    assert abs(noisy.std() - 0.3) < 0.006


def test_clear_errors(pool):
    x, y = pool
    flat = x.reshape(120, -1)
    with pytest.raises(ValueError, match="square images"):
        feature_shift_partition(flat, y, num_clients=4, seed=0)
    part, _ = feature_shift_partition(flat, y, num_clients=4, seed=0, rotation=0)
    assert part.xs[0].shape[1:] == (64,)       # contrast and noise work on any features
    with pytest.raises(ValueError, match="contrast"):
        feature_shift_partition(x, y, num_clients=4, seed=0, contrast=0.5)
    with pytest.raises(ValueError, match="rotation"):
        feature_shift_partition(x, y, num_clients=4, seed=0, rotation=181)
    with pytest.raises(ValueError, match="noise"):
        feature_shift_partition(x, y, num_clients=4, seed=0, noise=-1)


def test_build_federation_and_cli(tmp_path, capsys):
    from pflt.cli import main
    from synthetic.sources import DataSpec, build_federation

    spec = DataSpec(data="digits", num_clients=8, partition="feature-shift", seed=2)
    fed = build_federation(spec, device="cpu")
    again = build_federation(spec, device="cpu")
    assert fed.name == "digits/feature-shift" and fed.num_clients == 8
    assert (fed.train.x == again.train.x).all()
    common = ["--clients", "6", "--rounds", "1", "--no-progress", "--out", str(tmp_path / "r")]
    for bad, message in ((["--data", "digits", "--partition", "iid", "--shift-noise", "0.3"],
                          "--shift-noise do not apply"),
                         (["--data", "digits", "--partition", "feature-shift",
                           "--shift-contrast", "0.5"], "--shift-contrast must be >= 1"),
                         (["--data", "synthetic", "--shift-rotation", "10"],
                          "--shift-rotation do not apply")):
        assert main(["run", "--algorithm", "fedavg", *bad, *common]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
