import dataclasses
import gzip
import struct

import numpy as np
import pytest

from pflt.cli import main
from synthetic.real_data import registry
from synthetic.real_data.registry import SplitPins
from synthetic.sources import DataSpec, build_federation


def _write_idx(path, array):
    """IDX: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian dims, raw bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture()
def mnist_dir(tmp_path):
    """300 + 60 MNIST-like images; the registry pins these counts for the test (every real
    load is validated: the real MNIST pins would refuse this tiny copy)."""
    rng = np.random.RandomState(0)
    for prefix, n in (("train", 300), ("t10k", 60)):
        labels = np.arange(n) % 10
        images = (rng.rand(n, 28, 28) * 40 + labels[:, None, None] * 20).astype(np.uint8)
        _write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images)
        _write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", labels)
    real = registry.entry("mnist")
    tiny = dataclasses.replace(real, splits={
        "train": SplitPins(300, 10, (1, 28, 28), (30,) * 10),
        "test": SplitPins(60, 10, (1, 28, 28), (6,) * 10)})
    with registry.override({"mnist": tiny}):
        yield tmp_path


def test_the_real_pins_refuse_a_tiny_copy(tmp_path):
    rng = np.random.RandomState(0)
    for prefix, n in (("train", 300), ("t10k", 60)):
        labels = np.arange(n) % 10
        _write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.rand(n, 28, 28) * 40)
        _write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", labels)
    with pytest.raises(ValueError, match="mnist train split.*expected 60000 samples, found 300"):
        build_federation(DataSpec(data=f"mnist:{tmp_path}", num_clients=4), device="cpu")


def test_pfedme_runs_on_local_mnist_files(mnist_dir, tmp_path):
    out = tmp_path / "run"
    code = main(["run", "--data", f"mnist:{mnist_dir}", "--clients", "5",
                 "--classes-per-client", "2", "--size-range", "20", "40", "--rounds", "2",
                 "--local-rounds", "2", "--inner-steps", "2", "--clients-per-round", "2",
                 "--out", str(out), "--no-progress"])
    assert code == 0 and (out / "history.json").exists()


def test_label_skew_federation_has_the_requested_classes(mnist_dir):
    fed = build_federation(DataSpec(data=f"mnist:{mnist_dir}", num_clients=4,
                                    classes_per_client=2, size_range=(20, 30), seed=1),
                           device="cpu")
    assert fed.num_clients == 4 and fed.feature_shape == (1, 28, 28) and fed.num_classes == 10
    for i in range(4):
        o, c = int(fed.train.offsets[i]), int(fed.train.counts[i])
        assert len(set(fed.train.y[o:o + c].tolist())) <= 2


def test_missing_files_and_unknown_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images"):
        build_federation(DataSpec(data=f"mnist:{tmp_path}", num_clients=2), device="cpu")
    with pytest.MonkeyPatch.context() as mp:    # no directory: the (empty) data home
        mp.setenv("PFLT_DATA", str(tmp_path / "empty-home"))
        with pytest.raises(FileNotFoundError, match="pflt data fetch cifar10"):
            build_federation(DataSpec(data="cifar10", num_clients=2), device="cpu")
    with pytest.raises(ValueError, match="unknown dataset"):
        build_federation(DataSpec(data="imagenet"), device="cpu")
    with pytest.raises(ValueError, match="unknown partition"):
        build_federation(DataSpec(data=f"mnist:{tmp_path}", partition="zipf"), device="cpu")


def test_digits_out_of_the_box(tmp_path):
    pytest.importorskip("sklearn", reason="the 'data' extra provides scikit-learn")
    fed = build_federation(DataSpec(data="digits", num_clients=10, partition="dirichlet",
                                    dirichlet_alpha=0.5, seed=0), device="cpu")
    assert fed.num_clients == 10 and fed.num_classes == 10
    assert int(fed.train.counts.sum() + fed.test.counts.sum()) == 1797
    code = main(["run", "--data", "digits", "--clients", "10", "--model", "cnn", "--rounds", "1",
                 "--local-rounds", "2", "--inner-steps", "1", "--clients-per-round", "3",
                 "--partition", "iid", "--out", str(tmp_path / "d"), "--no-progress"])
    assert code == 2  # 8x8 images are too small for the 2-conv CNN: a clear error, not a crash
    code = main(["run", "--data", "digits", "--clients", "10", "--model", "dnn", "--rounds", "1",
                 "--local-rounds", "2", "--inner-steps", "1", "--clients-per-round", "3",
                 "--partition", "iid", "--out", str(tmp_path / "d"), "--no-progress"])
    assert code == 0


def test_max_client_size_auto_none_and_int():
    from synthetic.sources import DataSpec, build_federation

    def sizes(cap):
        fed = build_federation(DataSpec(num_clients=6, max_client_size=cap), device="cpu")
        return (fed.train.counts + fed.test.counts).tolist()
    full = sizes(None)
    assert sizes("auto") == full == sizes("none")   # 6 clients fit the 1 GiB budget
    assert sizes(300) == [min(n, 300) for n in full] and max(full) > 300


def test_standardize_and_validation_fraction_data_options():
    # standardize: every pixel (x − mean)/(std + 0.001) over the pool; validation: the
    # evaluated split is carved from the training split, the test split is never built.
    # mutations caught: no standardisation (mean 0.3), the old test split kept as "test"
    import numpy as np

    from synthetic.real_data.partition_overlap import row_digests
    from synthetic.sources import DataSpec, build_federation, standardize_pool

    x = np.random.default_rng(0).random((50, 4)).astype(np.float32)
    z = standardize_pool(x)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-5)          # float32 sums of 50
    np.testing.assert_allclose(z.std(0), x.std(0) / (x.std(0) + 1e-3), rtol=1e-4)
    base = DataSpec(data="digits", num_clients=5, partition="iid", seed=0)
    plain = build_federation(base, device="cpu")
    std = build_federation(DataSpec(**{**base.__dict__, "standardize": True}), device="cpu")
    assert abs(float(plain.train.x.mean())) > 0.05 and abs(float(torch_mean(std))) < 0.05
    val = build_federation(DataSpec(**{**base.__dict__, "validation_fraction": 0.2}),
                           device="cpu")
    train_rows = set(row_digests(plain.train.x).tolist())
    assert set(row_digests(val.test.x).tolist()) <= train_rows
    assert set(row_digests(val.train.x).tolist()) <= train_rows
    assert int(val.train.counts.sum() + val.test.counts.sum()) == int(plain.train.counts.sum())
    assert not set(row_digests(val.test.x).tolist()) & set(row_digests(plain.test.x).tolist())


def torch_mean(fed):
    import torch

    return torch.cat([fed.train.x.flatten(), fed.test.x.flatten()]).mean()
