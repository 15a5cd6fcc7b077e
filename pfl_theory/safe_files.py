"""Writing output files safely: atomically, never through a symbolic link, and with a full
disk reported as one :class:`OSError` that leaves the previous file in place.

Every file an output directory receives goes through here:

* :func:`atomic_open` / :func:`atomic_write_text` / :func:`atomic_save` write to a temporary
  file in the destination's own directory (created exclusively, so it is never a link) and
  rename it over the destination only once it is complete.  A write that fails (a full disk,
  ``ENOSPC``; a kill) removes the temporary and leaves the previous file as it was — no
  half-written file, no large temporary left behind.
* A destination that is a symbolic link is refused (:class:`UnsafeOutputError`): the rename
  would replace the link, and an append would write through it to wherever it points, i.e.
  outside the output directory.  :func:`append_text` opens with ``O_NOFOLLOW`` for the same
  reason; :func:`safe_subdir` refuses linked directory components below an output directory.
* Every byte goes through :func:`os_write` (``os.write``), so a test can simulate a full disk
  for all of the above by replacing that one function.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Callable, Iterator


class UnsafeOutputError(OSError):
    """An output path that would write or create outside the output directory (a symbolic
    link, a file where a directory is needed)."""

    def __str__(self) -> str:  # one line, without errno decoration
        return str(self.args[0]) if self.args else "unsafe output path"


def os_write(fd: int, data: memoryview | bytes) -> int:
    """``os.write``; the single place every byte is written (tests replace it)."""
    return os.write(fd, data)


def refuse_link(path: str | Path) -> Path:
    """``path``, or :class:`UnsafeOutputError` if it is a symbolic link."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafeOutputError(f"{path} is a symbolic link (to {os.readlink(path)}); "
                                "pflt does not write through links: remove it or choose "
                                "another --out")
    return path


def safe_subdir(root: str | Path, relative: str | Path) -> Path:
    """``root/relative`` as a directory, created if missing; every component below ``root``
    must be a real directory (not a link, not a file), else :class:`UnsafeOutputError`.
    ``relative`` must not climb out of ``root`` (no ``..``, not absolute)."""
    root, rel = Path(root), Path(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise UnsafeOutputError(f"{relative} is not a path inside {root}")
    path = root
    for part in rel.parts:
        path = refuse_link(path / part)
        if path.exists() and not path.is_dir():
            raise UnsafeOutputError(f"{path} exists and is not a directory")
        path.mkdir(exist_ok=True)
    return path


class _FdWriter(io.RawIOBase):
    """A raw binary writer on a file descriptor that writes through :func:`os_write` and
    remembers the first :class:`OSError` (torch reports a failed write as RuntimeError)."""

    def __init__(self, fd: int, name: Path):
        super().__init__()
        self.fd, self.name, self.error = fd, name, None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        try:
            return os_write(self.fd, data)
        except OSError as exc:
            if exc.filename is None:
                exc = OSError(exc.errno, exc.strerror or str(exc), str(self.name))
            self.error = self.error or exc
            raise exc from None

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def remove_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporary files that an atomic write of ``path`` left behind when its
    process was killed between creating and renaming them (``.<name>.*.tmp`` beside it,
    plain files only, never through a link); the paths removed.  Call it only while no
    other process writes ``path`` (e.g. holding the run directory's lock)."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _temporary(path: Path) -> tuple[_FdWriter, Path]:
    refuse_link(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "No such directory", str(path.parent))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)            # mkstemp's 0600 -> what open() would give
    return _FdWriter(fd, path), Path(tmp)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str = "utf-8",
                newline: str | None = None) -> Iterator[IO]:
    """A file to write ``path``'s new content into (``mode`` ``"w"`` text or ``"wb"``
    binary); renamed over ``path`` when the block ends without an exception, removed
    otherwise (the previous ``path`` is untouched)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    raw, tmp = _temporary(path)
    try:
        buffered = io.BufferedWriter(raw)
        fh = buffered if mode == "wb" else io.TextIOWrapper(buffered, encoding=encoding,
                                                            newline=newline)
        try:
            yield fh
            fh.flush()
        except RuntimeError:
            if raw.error is not None:   # torch's report of a failed write: the OSError
                raise raw.error from None
            raise
        finally:
            with contextlib.suppress(OSError, ValueError):
                fh.close()
        if raw.error is not None:
            raise raw.error
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path``'s content by ``text`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


def atomic_save(path: str | Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Replace ``path`` atomically by what ``write(binary_file)`` writes (``torch.save``,
    ``Figure.savefig``); a failed write is the :class:`OSError` it met."""
    with atomic_open(path, "wb") as fh:
        write(fh)
    return Path(path)


def append_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Append ``text`` to ``path`` (created if missing), never through a symbolic link."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise
    data = memoryview(text.encode(encoding))
    try:
        while data:
            try:
                data = data[os_write(fd, data):]
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        os.close(fd)
