"""Check real data against the pins of :mod:`synthetic.real_data.registry`.

* :func:`check_split` — what a load returned: sample count, count of every class, image
  shape and dtype, label dtype and range.  Run on *every* load
  (:func:`synthetic.real_data.load.load_validated`), so a changed label byte, a missing or
  extra class, a truncated or reshaped file is refused before any partition is drawn.
* :func:`check_file` — a file's bytes: its size and its MD5/SHA-256 as published, or the
  SHA-256 of its decompressed content (a recompressed or gunzipped copy verifies too).  The
  size known from ``stat`` is compared first (:func:`check_size`): a 50 GB sparse file is
  refused at once, not hashed; a decompression stops past the pinned content size.
* :func:`find_file` — the copy the loaders read (``x`` before ``x.gz``): what is verified
  is what is loaded.

Every failure is a :class:`DataMismatch` (a ``ValueError``) whose message is one line naming
the dataset, the split or file, the expected and the found value.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from synthetic.real_data.registry import PinnedFile, SplitPins

__all__ = ["DataMismatch", "check_file", "check_size", "check_split", "file_digest",
           "find_file", "largest_size"]

_CHUNK = 1 << 20


class DataMismatch(ValueError):
    """Data that do not match their pinned description (one-line message)."""


def check_split(dataset: str, split: str, x: np.ndarray, y: np.ndarray, pins: SplitPins,
                where: str | Path = "") -> None:
    """Raise :class:`DataMismatch` unless ``(x, y)`` holds exactly what ``pins`` says."""
    at = f"{dataset} {split} split" + (f" in {where}" if where else "")
    if len(x) != pins.count or len(y) != pins.count:
        raise DataMismatch(f"{at}: expected {pins.count} samples, found {len(x)} images and "
                           f"{len(y)} labels")
    if tuple(x.shape[1:]) != pins.shape:
        raise DataMismatch(f"{at}: expected images of shape {pins.shape}, found "
                           f"{tuple(x.shape[1:])}")
    if str(x.dtype) != pins.dtype:
        raise DataMismatch(f"{at}: expected images of dtype {pins.dtype}, found {x.dtype}")
    if y.dtype != np.int64 or y.ndim != 1:
        raise DataMismatch(f"{at}: expected int64 labels of shape [n], found {y.dtype} "
                           f"{tuple(y.shape)}")
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= pins.num_classes):
        raise DataMismatch(f"{at}: expected labels in 0..{pins.num_classes - 1}, found "
                           f"{int(y.min())}..{int(y.max())}")
    if pins.class_counts is not None:
        found = np.bincount(y, minlength=pins.num_classes)
        bad = np.flatnonzero(found != np.asarray(pins.class_counts))
        if bad.size:
            k = int(bad[0])
            raise DataMismatch(f"{at}: expected {pins.class_counts[k]} samples of class {k}, "
                               f"found {int(found[k])} ({bad.size} class(es) differ)")


def find_file(root: Path, pinned: PinnedFile) -> Path | None:
    """The file of ``pinned`` in ``root`` that the loaders read: for ``x.gz`` the
    decompressed ``x`` if present, else ``x.gz`` (``synthetic.datasets`` tries them in
    that order); otherwise its name."""
    cands = ((root / pinned.name[:-3], root / pinned.name) if pinned.name.endswith(".gz")
             else (root / pinned.name,))
    return next((c for c in cands if c.is_file()), None)


def _published(pinned: PinnedFile, name: str) -> bool:
    """Whether ``name`` can pass only as the published bytes (no content digest)."""
    return name == pinned.name and pinned.size is not None and pinned.content_sha256 is None


def _exact(pinned: PinnedFile, name: str, published: bool) -> bool:
    """Whether a file named ``name`` must have exactly :func:`largest_size` bytes: the
    published file when only its bytes are pinned, or an uncompressed copy."""
    if published and _published(pinned, name):
        return True
    return not name.endswith(".gz") and pinned.content_size is not None


def largest_size(pinned: PinnedFile, name: str, *, published: bool = True) -> int | None:
    """The most bytes a file named ``name`` of ``pinned`` can hold (``None``: no bound):
    the published size for the published name (when only its bytes are pinned); the
    content size for a decompressed copy; for a (re)compressed ``.gz`` zlib's worst case
    (``deflateBound``: n + n/8 + n/64 + 5 bytes for any settings) plus 64 KiB for the
    gzip header's optional name and comment.  ``published=False``: the bound of any copy
    with the right content (what a loader can read), not of the published bytes."""
    if published and _published(pinned, name):
        return pinned.size
    if pinned.content_size is None:
        return None
    n = pinned.content_size
    if name.endswith(".gz"):
        return n + (n + 7) // 8 + (n + 63) // 64 + 5 + (1 << 16)
    return n


def check_size(path: Path, pinned: PinnedFile, *, name: str | None = None,
               published: bool = True) -> None:
    """Refuse ``path`` from ``stat`` alone when it is larger than :func:`largest_size`, or
    (an uncompressed copy, the published file) not of its exact pinned size.
    ``published=False``: only what no copy of the right content can be (the load's check:
    a recompressed ``.gz`` loads although its bytes are not the published ones)."""
    name = name or Path(path).name
    bound = largest_size(pinned, name, published=published)
    if bound is None:
        return
    size = Path(path).stat().st_size
    exact = _exact(pinned, name, published)
    if size > bound or (exact and size != bound):
        what = "at most " if not exact else ""
        raise DataMismatch(f"{path}: expected {what}{bound} bytes, found {size}")


def file_digest(path: Path, algorithm: str, *, decompress: bool = False,
                limit: int | None = None) -> tuple[str, int]:
    """``(hex digest, byte count)`` of the file (of its gunzipped content if
    ``decompress``), read in 1 MiB chunks; more than ``limit`` bytes is a
    :class:`DataMismatch` as soon as they are read (a gzip bomb is not inflated)."""
    h = hashlib.new(algorithm)
    size = 0
    opener = gzip.open if decompress else open
    try:
        with opener(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
                size += len(chunk)
                if limit is not None and size > limit:
                    raise DataMismatch(f"{path}: expected {limit} bytes of content, found "
                                       f"more")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataMismatch(f"{path}: corrupt or truncated gzip file ({exc})") from None
    return h.hexdigest(), size


def check_file(path: Path, pinned: PinnedFile, *, name: str | None = None) -> str:
    """Raise :class:`DataMismatch` unless ``path`` matches ``pinned``; returns how it was
    verified (``"md5"``, ``"sha256"``, ``"content sha256"``, or ``"no pinned digest"``).

    A file named as published (``x.gz`` for a pinned ``x.gz``) passes on its published
    digest; otherwise — or when only the content is pinned — on the SHA-256 of its
    decompressed content.  ``name``: the file's name when ``path`` is a temporary file
    (a download in progress)."""
    path = Path(path)
    name = name or path.name
    same_name = name == pinned.name
    gz = name.endswith(".gz")
    check_size(path, pinned, name=name)     # from stat, before any byte is hashed
    limit = pinned.content_size
    for algo, want in (("md5", pinned.md5), ("sha256", pinned.sha256)):
        if want and same_name:
            found, _ = file_digest(path, algo)
            if found == want:
                return algo
            if not pinned.content_sha256:
                raise DataMismatch(f"{path}: expected {algo} {want}, found {found}")
    if pinned.content_sha256:
        found, size = file_digest(path, "sha256", decompress=gz, limit=limit)
        if pinned.content_size is not None and size != pinned.content_size:
            raise DataMismatch(f"{path}: expected {pinned.content_size} bytes of content, "
                               f"found {size}")
        if found != pinned.content_sha256:
            raise DataMismatch(f"{path}: expected content sha256 {pinned.content_sha256}, "
                               f"found {found}")
        return "content sha256"
    if not same_name and pinned.content_size is not None:
        _, size = file_digest(path, "md5", decompress=gz, limit=limit)
        if size != pinned.content_size:
            raise DataMismatch(f"{path}: expected {pinned.content_size} bytes of content, "
                               f"found {size}")
    return "no pinned digest"
