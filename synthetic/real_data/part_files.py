"""The fetcher's temporary files (``<name>.part``), made safe against what else may sit in the
directory (issue 43: a symbolic link planted as the ``.part`` file made the fetch append a
download to the file it pointed to, outside ``--dir``).

* A part is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (never through a link, never onto
  a file already there), mode 0600; its device and inode are then recorded in a sidecar
  ``<name>.part.owner`` (written to a fresh temporary name, renamed into place).
* A part is resumed only when it is a regular file with one link (a hard link to a file
  elsewhere has two), owned by this user, opened with ``O_NOFOLLOW``, and its device and
  inode are those its sidecar recorded: a file the fetch did not write is never resumed.
  Anything else found under the part's name (a link, a fifo, a planted or foreign file)
  is removed — the name, never what a link points to — and the download starts over; a
  directory there is refused.

Write errors (disk full, ``ulimit -f``) are :class:`LocalFileError`, an ``OSError`` naming
the file, which the fetcher does not mistake for a network failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LocalFileError", "commit", "discard", "open_part", "resumable_size"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_SIDE = ".owner"


class LocalFileError(OSError):
    """Writing a file of the fetch failed (disk full, file size limit, permissions)."""


def _sidecar(part: Path) -> Path:
    return part.with_name(part.name + _SIDE)


def _remove(path: Path) -> None:
    """Remove the name ``path`` (a link: the link, never its target); a directory there is
    refused (it is nobody's partial download, and removing it could lose data)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "a directory where the fetch keeps its partial "
                                "download; move it away", str(path))
    path.unlink(missing_ok=True)


def discard(part: Path) -> None:
    """Remove ``part`` and its sidecar (the names only)."""
    try:
        _remove(part)
        _remove(_sidecar(part))
    except OSError as exc:
        raise LocalFileError(exc.errno, exc.strerror or str(exc), str(part)) from None


def _recorded(part: Path) -> tuple[int, int] | None:
    """``(device, inode)`` recorded by the sidecar, or ``None`` (none, a link, unreadable)."""
    try:
        fd = os.open(_sidecar(part), os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = json.loads(os.read(fd, 4096).decode("ascii"))
        return int(data["dev"]), int(data["ino"])
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _ours(fd: int, part: Path) -> bool:
    st = os.fstat(fd)
    return (stat.S_ISREG(st.st_mode) and st.st_nlink == 1
            and (not hasattr(os, "geteuid") or st.st_uid == os.geteuid())
            and _recorded(part) == (st.st_dev, st.st_ino))


def _open_ours(part: Path) -> int | None:
    """A descriptor (append) of ``part`` if this fetch wrote it, else ``None``."""
    try:
        fd = os.open(part, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:            # missing, a link (ELOOP), a directory, a fifo without reader
        return None
    if _ours(fd, part):
        return fd
    os.close(fd)
    return None


def resumable_size(part: Path) -> int:
    """Bytes of ``part`` a download may resume from: its size if this fetch wrote it;
    otherwise whatever is there is removed (:func:`discard`) and 0 is returned."""
    fd = _open_ours(part)
    if fd is None:
        discard(part)
        return 0
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _create(part: Path) -> int:
    discard(part)
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except OSError as exc:
        raise LocalFileError(exc.errno, exc.strerror or str(exc), str(part)) from None
    st = os.fstat(fd)
    side = _sidecar(part)
    tmp = side.with_name(f"{side.name}.{os.getpid()}.tmp")
    try:
        _remove(tmp)
        sfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        with os.fdopen(sfd, "w") as fh:
            json.dump({"dev": st.st_dev, "ino": st.st_ino}, fh)
        os.replace(tmp, side)           # replaces a planted link, never follows it
    except OSError as exc:
        os.close(fd)
        raise LocalFileError(exc.errno, exc.strerror or str(exc), str(side)) from None
    return fd


class _Writer:
    """``write``/``finish`` on a part's descriptor; errors name the part."""

    def __init__(self, fd: int, part: Path):
        self.fd, self.part = fd, part

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:
            raise LocalFileError(exc.errno, exc.strerror or str(exc), str(self.part)) from None

    def writelines(self, chunks) -> None:
        for chunk in chunks:
            self.write(chunk)

    def finish(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise LocalFileError(exc.errno, exc.strerror or str(exc), str(self.part)) from None


@contextlib.contextmanager
def open_part(part: Path, *, append: bool) -> Iterator[_Writer]:
    """A writer on ``part``: appending to the part this fetch wrote (``append``; if it is no
    longer that file, a fresh one is started — the caller sees the size through
    :func:`resumable_size` first, so a change in between is a ``LocalFileError``), or a
    fresh part."""
    fd = _open_ours(part) if append else None
    if append and fd is None:
        raise LocalFileError(0, "the partial download changed while it was resumed", str(part))
    if fd is None:
        fd = _create(part)
    try:
        yield _Writer(fd, part)
    finally:
        os.close(fd)


def commit(part: Path, target: Path) -> None:
    """Rename the verified ``part`` onto ``target`` (atomic; a link at ``target`` is
    replaced, not followed), drop the sidecar, make the rename durable."""
    try:
        os.replace(part, target)
    except OSError as exc:
        raise LocalFileError(exc.errno, exc.strerror or str(exc), str(target)) from None
    with contextlib.suppress(OSError):
        _remove(_sidecar(part))
    with contextlib.suppress(OSError):  # make the rename itself durable (POSIX)
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

