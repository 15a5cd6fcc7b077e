"""Check real data against the pins of :mod:`synthetic.real_data.registry`.

* :func:`check_split` — what a load returned: sample count, count of every class, image
  shape and dtype, label dtype and range.  Run on *every* load
  (:func:`synthetic.real_data.load.load_validated`), so a changed label byte, a missing or
  extra class, a truncated or reshaped file is refused before any partition is drawn.
* :func:`check_file` — a file's bytes: its size and its MD5/SHA-256 as published, or the
  SHA-256 of its decompressed content (a recompressed or gunzipped copy verifies too).

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

__all__ = ["DataMismatch", "check_file", "check_split", "file_digest", "find_file"]

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
    """The file of ``pinned`` in ``root``: its name, or (for ``x.gz``) the decompressed
    ``x``, as the loaders accept either."""
    for cand in (root / pinned.name,
                 root / pinned.name[:-3] if pinned.name.endswith(".gz") else None):
        if cand is not None and cand.is_file():
            return cand
    return None


def file_digest(path: Path, algorithm: str, *, decompress: bool = False) -> tuple[str, int]:
    """``(hex digest, byte count)`` of the file (of its gunzipped content if
    ``decompress``), read in 1 MiB chunks."""
    h = hashlib.new(algorithm)
    size = 0
    opener = gzip.open if decompress else open
    try:
        with opener(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
                size += len(chunk)
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
    if same_name and pinned.size is not None and pinned.content_sha256 is None:
        size = path.stat().st_size
        if size != pinned.size:
            raise DataMismatch(f"{path}: expected {pinned.size} bytes, found {size}")
    for algo, want in (("md5", pinned.md5), ("sha256", pinned.sha256)):
        if want and same_name:
            found, _ = file_digest(path, algo)
            if found == want:
                return algo
            if not pinned.content_sha256:
                raise DataMismatch(f"{path}: expected {algo} {want}, found {found}")
    if pinned.content_sha256:
        found, size = file_digest(path, "sha256", decompress=gz)
        if pinned.content_size is not None and size != pinned.content_size:
            raise DataMismatch(f"{path}: expected {pinned.content_size} bytes of content, "
                               f"found {size}")
        if found != pinned.content_sha256:
            raise DataMismatch(f"{path}: expected content sha256 {pinned.content_sha256}, "
                               f"found {found}")
        return "content sha256"
    if not same_name and pinned.content_size is not None:
        _, size = file_digest(path, "md5", decompress=gz)
        if size != pinned.content_size:
            raise DataMismatch(f"{path}: expected {pinned.content_size} bytes of content, "
                               f"found {size}")
    return "no pinned digest"
