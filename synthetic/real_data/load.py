"""Every real-data load goes through here: read the directory with the loaders of
:mod:`synthetic.datasets`, then check each split against its pins
(:func:`synthetic.real_data.validate.check_split`) before anything uses it.

:func:`verify_directory` adds the file digests (``pflt data verify``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from synthetic.real_data import registry
from synthetic.real_data.validate import check_file, check_size, check_split, find_file

__all__ = ["load_validated", "parse_name", "verify_directory"]


def parse_name(text: str) -> tuple[str, str]:
    """``NAME[:DIR]`` -> ``(canonical name, DIR or "")``; ``emnist:DIR`` is EMNIST balanced,
    ``emnist-letters:DIR`` its letters split."""
    name, _, root = text.partition(":")
    return registry.entry(name).name, root


def load_validated(name: str, root: str | Path, subset: str = "all"
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of dataset ``name`` read from ``root``: ``subset`` ``train``, ``test`` or
    ``all`` (train then test).  Each split is checked against the pinned counts, shape,
    dtype and label range first; :class:`DataMismatch` (one line) otherwise.  The size of
    each file the loader will read is compared (``stat``) before it is read: a file far too
    large (a 50 GB sparse file) is refused at once, not read into memory."""
    from synthetic import datasets

    entry = registry.entry(name)
    base = _file_dir(entry, datasets._expand(root))
    for pinned in entry.files:
        path = find_file(base, pinned)
        if path is not None:
            check_size(path, pinned, published=False)
    parts = {"train": ("train",), "test": ("test",), "all": ("train", "test")}
    if subset not in parts:
        raise ValueError(f"subset must be train, test or all, got {subset!r}")
    xs, ys = [], []
    for split in parts[subset]:
        x, y = datasets.load_dataset(entry.loader, root, subset=split, **entry.loader_kwargs)
        check_split(entry.name, split, x, y, entry.splits[split], where=root)
        xs.append(x)
        ys.append(y)
    if len(xs) == 1:
        return xs[0], ys[0]
    return np.concatenate(xs), np.concatenate(ys)


def verify_directory(name: str, root: str | Path) -> list[str]:
    """Check every file of ``name`` in ``root`` against its pinned digest, then load and
    check every split.  Returns one line per file/split saying how it was verified;
    ``FileNotFoundError`` for a missing file,
    :class:`~synthetic.real_data.validate.DataMismatch` for any mismatch."""
    entry = registry.entry(name)
    root = Path(root).expanduser()
    base = _file_dir(entry, root)
    lines = []
    for pinned in entry.files:
        path = find_file(base, pinned)
        if path is None:
            raise FileNotFoundError(f"{entry.name}: {base / pinned.name} is missing (fetch it "
                                    f"with: pflt data fetch {entry.name} --dir {root})")
        lines.append(f"{path.name}: {check_file(path, pinned)} ok")
    for split, pins in entry.splits.items():
        x, y = load_validated(entry.name, root, subset=split)
        del x
        per = "per-class counts" if pins.class_counts else "total (per-class not pinned)"
        lines.append(f"{split}: {len(y)} samples, {pins.num_classes} classes, "
                     f"shape {pins.shape}, {per} ok")
    return lines


def _file_dir(entry: registry.DatasetEntry, root: Path) -> Path:
    """CIFAR's loaders also read the extracted ``root/cifar-10-batches-py``; the files are
    looked up where the loader would find them."""
    member_dirs = {f.member.rsplit("/", 1)[0] for f in entry.files if f.member and "/" in f.member}
    for sub in sorted(member_dirs):
        if entry.loader.startswith(("cifar", "tiny")) and not find_file(root, entry.files[0]) \
                and (root / sub).is_dir():
            return root / sub
    return root

