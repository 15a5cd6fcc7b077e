"""Small datasets in the real file formats (gzipped IDX; CIFAR's pickled batches) with
registry entries pinning them (MD5 of the bytes written here, counts of the labels written
here), for the reproduction tests: the fixture ``real_format_data`` (tests/conftest.py)
is :func:`make`: ``make(tmp_path / name, name)`` writes one dataset and returns
``(directory, registry entry)``; use it under ``registry.override``."""

from __future__ import annotations

import gzip
import hashlib
import pickle
import struct

import numpy as np

from synthetic.real_data.registry import DatasetEntry, PinnedFile, SplitPins

#: dataset -> (classes, train per class, test per class, label offset in the files)
SIZES = {"mnist": (10, 40, 10, 0), "fmnist": (10, 40, 10, 0), "emnist-letters": (26, 16, 4, 1),
         "cifar10": (10, 40, 10, 0), "cifar100": (100, 8, 2, 0)}


def _idx(arr) -> bytes:
    arr = np.asarray(arr, dtype=np.uint8)
    return (struct.pack(">BBBB", 0, 0, 0x08, arr.ndim)
            + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes())


def _labels(classes: int, per: int, rng) -> np.ndarray:
    return rng.permutation(np.repeat(np.arange(classes), per))


def _images(y: np.ndarray, shape, rng) -> np.ndarray:
    """Class-dependent pixels (so that the models learn something), uint8."""
    base = rng.integers(0, 256, size=(int(y.max()) + 1, *shape))
    noise = rng.integers(-40, 41, size=(len(y), *shape))
    return np.clip(base[y] + noise, 0, 255).astype(np.uint8)


def _files(name: str, seed: int = 0) -> dict[str, bytes]:
    classes, n_tr, n_te, offset = SIZES[name]
    rng = np.random.default_rng(seed)
    out = {}
    if name.startswith("cifar"):
        key = b"labels" if name == "cifar10" else b"fine_labels"
        ys = {s: _labels(classes, n, rng) for s, n in (("train", n_tr), ("test", n_te))}
        xs = {s: _images(y, (3072,), rng) for s, y in ys.items()}
        if name == "cifar10":
            parts = np.array_split(np.arange(len(ys["train"])), 5)
            for j, idx in enumerate(parts, 1):
                out[f"data_batch_{j}"] = pickle.dumps(
                    {b"data": xs["train"][idx], key: ys["train"][idx].tolist()}, protocol=2)
            out["test_batch"] = pickle.dumps({b"data": xs["test"], key: ys["test"].tolist()},
                                             protocol=2)
        else:
            for s in ("train", "test"):
                out[s] = pickle.dumps({b"data": xs[s], key: ys[s].tolist(),
                                       b"coarse_labels": (ys[s] // 5).tolist()}, protocol=2)
        return out
    prefix = "emnist-letters-" if name == "emnist-letters" else ""
    for split, n in (("train", n_tr), (("test" if prefix else "t10k"), n_te)):
        y = _labels(classes, n, rng)
        out[f"{prefix}{split}-images-idx3-ubyte.gz"] = gzip.compress(
            _idx(_images(y, (28, 28), rng)), mtime=0)
        out[f"{prefix}{split}-labels-idx1-ubyte.gz"] = gzip.compress(_idx(y + offset), mtime=0)
    return out


def _entry(name: str, files: dict[str, bytes]) -> DatasetEntry:
    classes, n_tr, n_te, _ = SIZES[name]
    shape = (3, 32, 32) if name.startswith("cifar") else (1, 28, 28)
    pins = tuple(PinnedFile(f, md5=hashlib.md5(b).hexdigest(), size=len(b))
                 for f, b in files.items())
    splits = {"train": SplitPins(classes * n_tr, classes, shape, (n_tr,) * classes),
              "test": SplitPins(classes * n_te, classes, shape, (n_te,) * classes)}
    loader = {"fmnist": "fashion_mnist", "emnist-letters": "emnist"}.get(name, name)
    kwargs = {"split": "letters"} if name == "emnist-letters" else {}
    return DatasetEntry(name, f"small {name}", loader, pins, splits, (), name,
                        loader_kwargs=kwargs)


def make(root, name: str):
    root.mkdir(parents=True, exist_ok=True)
    files = _files(name)
    for f, b in files.items():
        (root / f).write_bytes(b)
    return root, _entry(name, files)
