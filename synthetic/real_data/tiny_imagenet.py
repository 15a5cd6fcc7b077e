"""Tiny-ImageNet-200 (cs231n, Stanford) from its extracted folder — PLGU (CVPR 2023) §6's
``TmgNet`` (issue 42 item 5).

The archive ``tiny-imagenet-200.zip`` unpacks to::

    tiny-imagenet-200/wnids.txt                        the 200 WordNet ids, one a line
    tiny-imagenet-200/train/<wnid>/images/<wnid>_<k>.JPEG   500 per class (64×64 RGB)
    tiny-imagenet-200/val/images/val_<k>.JPEG          10,000 images, 50 per class
    tiny-imagenet-200/val/val_annotations.txt          ``file <TAB> wnid <TAB> x0 y0 x1 y1``
    tiny-imagenet-200/test/images/…                    unlabelled: not read

Class ``k`` is the ``k``-th line of ``wnids.txt``.  The *validation* images are the labelled
held-out split (``subset="test"``); each takes its class from ``val_annotations.txt`` — a
loader that takes it from the folder (all validation images sit in one ``images`` folder)
labels every one of them alike, which the pins (50 per class) refuse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["FOLDER", "load_tiny_imagenet"]

FOLDER = "tiny-imagenet-200"
_SUFFIXES = {".jpeg", ".jpg", ".png"}


def _base(root: Path) -> Path:
    if not (root / "wnids.txt").is_file() and (root / FOLDER / "wnids.txt").is_file():
        return root / FOLDER
    return root


def _wnids(base: Path) -> list[str]:
    path = base / "wnids.txt"
    if not path.is_file():
        raise FileNotFoundError(f"Tiny-ImageNet: {path} is missing (extract "
                                f"tiny-imagenet-200.zip so that it sits in '{base}' or "
                                f"'{base / FOLDER}')")
    ids = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if len(set(ids)) != len(ids):
        raise ValueError(f"Tiny-ImageNet: {path} repeats a class id")
    return ids


def _read(paths: list[Path]) -> np.ndarray:
    from PIL import Image

    out = np.empty((len(paths), 3, 64, 64), dtype=np.float32)
    for i, p in enumerate(paths):
        with Image.open(p) as im:
            arr = np.asarray(im.convert("RGB"), dtype=np.float32)   # grey images -> RGB
        if arr.shape != (64, 64, 3):
            raise ValueError(f"Tiny-ImageNet: {p} is {arr.shape[1]}×{arr.shape[0]}, not 64×64")
        out[i] = arr.transpose(2, 0, 1) / np.float32(255.0)
    return out


def _train(base: Path, ids: list[str]) -> tuple[list[Path], list[int]]:
    paths, labels = [], []
    for k, wnid in enumerate(ids):
        folder = base / "train" / wnid / "images"
        if not folder.is_dir():
            folder = base / "train" / wnid
        if not folder.is_dir():
            raise FileNotFoundError(f"Tiny-ImageNet: no training folder {base / 'train' / wnid}")
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in _SUFFIXES)
        paths += files
        labels += [k] * len(files)
    return paths, labels


def _val(base: Path, ids: list[str]) -> tuple[list[Path], list[int]]:
    ann = base / "val" / "val_annotations.txt"
    if not ann.is_file():
        raise FileNotFoundError(f"Tiny-ImageNet: {ann} is missing (the validation labels)")
    index = {w: k for k, w in enumerate(ids)}
    paths, labels = [], []
    for n, line in enumerate(ann.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or fields[1] not in index:
            raise ValueError(f"Tiny-ImageNet: {ann} line {n}: expected 'file<TAB>wnid<TAB>…' "
                             f"with a wnid of wnids.txt, got {line[:60]!r}")
        path = base / "val" / "images" / fields[0]
        if not path.is_file():
            raise FileNotFoundError(f"Tiny-ImageNet: {path} (named in {ann.name}) is missing")
        paths.append(path)
        labels.append(index[fields[1]])
    return paths, labels


def load_tiny_imagenet(root: str | Path, *, subset: str = "train"
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Tiny-ImageNet from ``root`` (or ``root/tiny-imagenet-200``): ``X`` float32
    ``[n, 3, 64, 64]`` in ``[0, 1]`` (grey images repeated to RGB), ``y`` int64 in 0–199
    (``wnids.txt`` order).  ``subset``: ``train`` (100,000), ``test`` (the labelled
    validation split, 10,000, labels from ``val/val_annotations.txt``) or ``all``."""
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be train, test or all, got {subset!r}")
    base = _base(Path(root).expanduser())
    ids = _wnids(base)
    paths: list[Path] = []
    labels: list[int] = []
    for part in (("train", "test") if subset == "all" else (subset,)):
        p, y = (_train if part == "train" else _val)(base, ids)
        paths += p
        labels += y
    return _read(paths), np.asarray(labels, dtype=np.int64)
