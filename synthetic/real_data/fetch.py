"""Download a real dataset against its pins (``pflt data fetch``).  Only this module touches
the network, and only when :func:`fetch` is called — never at import, never from ``pflt run``.

For each download (the IDX ``.gz`` files, or CIFAR's ``.tar.gz`` / EMNIST's ``gzip.zip``):

1. a copy already in the directory that matches its pin is kept (no download) — the copy
   the loader reads (``x`` before ``x.gz``); one that does not match is removed;
2. the sources are tried in order — the ``mirrors`` given first, then the registry's
   canonical source and known mirrors (each a base URL; the file name is appended);
3. bytes go to ``<name>.part`` beside the target, created exclusively, never through a
   link, and resumed only if this fetch wrote it (:mod:`synthetic.real_data.part_files`);
   a connection that drops is resumed with an HTTP ``Range`` request (the same source,
   while each try brings new bytes), a server that ignores ``Range`` restarts the file, a
   server sending more than the pinned size is cut off; every socket operation has a
   ``timeout``;
4. the size and digest are checked (published MD5/SHA-256, or the SHA-256 of the
   decompressed content); a mismatch removes the bad bytes and tries the next source;
5. the verified file is flushed to disk and renamed onto its name (``os.replace``: atomic),
   so a loader only ever sees a complete, verified file.

Archives are then unpacked the same way (member to ``.part``, check, rename).  Concurrent
fetches into one directory take turns on a lock file (``.pflt-fetch.lock``, POSIX ``flock``),
so the second finds the first's verified files and downloads nothing.

Errors are one line: :class:`~synthetic.real_data.validate.DataMismatch` (file, expected,
found) when every source served bad bytes; :class:`FetchError` when none could be reached,
saying which files to place where and how to verify them.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import os
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from synthetic.real_data import registry
from synthetic.real_data.part_files import (LocalFileError, commit, discard, open_part,
                                            resumable_size)
from synthetic.real_data.registry import DatasetEntry, PinnedFile
from synthetic.real_data.validate import DataMismatch, check_file, find_file, largest_size

__all__ = ["DEFAULT_TIMEOUT", "FetchError", "fetch"]

DEFAULT_TIMEOUT = 30.0
#: what a failed request raises: URLError/HTTPError/timeouts/resets (OSError),
#: IncompleteRead and protocol errors (HTTPException), a malformed URL (ValueError)
_NETWORK_ERRORS = (OSError, http.client.HTTPException, ValueError)
_CHUNK = 1 << 16


class FetchError(OSError):
    """No source could deliver the file (offline, unreachable, 404 everywhere)."""


def fetch(name: str, dest: str | Path | None = None, mirrors: Sequence[str] = (), *,
          timeout: float = DEFAULT_TIMEOUT, progress: IO[str] | None = sys.stderr,
          attempts: int = 5) -> Path:
    """Fetch dataset ``name`` into ``dest`` and return the directory that holds it.  Without
    ``dest``: a verified copy in the data home or an OS package's directory (Debian's
    Fashion-MNIST) is used as is, else the data home's directory is filled.  ``mirrors``: base URLs tried before the registry's; ``timeout``: seconds per
    socket operation; ``progress``: stream for the progress bar (``None``: quiet);
    ``attempts``: tries per source while each try brings new bytes (resume)."""
    from synthetic.real_data.home import data_home, find_dataset
    from synthetic.real_data.load import _file_dir

    entry = registry.entry(name)
    check_timeout(timeout)
    for mirror in mirrors:
        check_mirror(mirror)
    if dest is None:   # already in the home or an OS package's directory, verified
        found = find_dataset(entry.name)
        if found is not None and _all_present(entry, _file_dir(entry, found)):
            return found
    dest = Path(dest).expanduser() if dest else data_home() / entry.home
    dest.mkdir(parents=True, exist_ok=True)
    bases = [m if m.endswith("/") else m + "/" for m in (*mirrors, *entry.urls)]
    with _locked(dest):
        if entry.archive and _all_present(entry, dest):
            return dest
        for pinned in entry.downloads:
            _ensure(entry, pinned, dest, bases, timeout, progress, attempts)
        if entry.archive:
            _extract(entry, dest)
    return dest


#: the longest socket timeout accepted (a day; ``inf`` overflows the platform's time_t)
MAX_TIMEOUT = 86400.0
_SCHEMES = ("http", "https", "ftp", "file")


def check_timeout(timeout: float) -> None:
    """A finite number of seconds in (0, :data:`MAX_TIMEOUT`] (one-line ``ValueError``)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"--timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], "
                         f"got {timeout}")


def check_mirror(url: str) -> None:
    """A base URL the fetcher can use: http(s), ftp or file, a host for the network ones,
    no credentials (urllib would not send them; the message never repeats them)."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port
    except ValueError:
        parts = None
    if parts is not None and (parts.username is not None or parts.password is not None):
        host = parts.hostname or "?"
        raise ValueError(f"--mirror {parts.scheme}://***@{host}/…: credentials in the URL "
                         f"(user:password@) are not supported (they would not be sent); use "
                         f"a mirror that needs none, or download the files yourself and give "
                         f"their directory (--mirror file:///DIR/)")
    if parts is None or parts.scheme not in _SCHEMES \
            or (parts.scheme != "file" and not parts.hostname):
        raise ValueError(f"--mirror {url!r}: not a base URL (expected http://HOST/PATH/, "
                         f"https://…, ftp://… or file:///DIR/)")


# ----------------------------------------------------------------------------- one file
def _keep_present(dest: Path, pinned: PinnedFile) -> bool:
    """Whether the copy the loader would read verifies; each copy that does not is removed
    (a bad copy is replaced, never used), then the next one the loader would read is
    tried (``x`` before ``x.gz``)."""
    while (present := find_file(dest, pinned)) is not None:
        try:
            how = check_file(present, pinned)
        except DataMismatch:
            present.unlink()
            continue
        if how == _UNVERIFIED and pinned.pinned:
            raise DataMismatch(_unverifiable(present, pinned))
        return True
    return False


_UNVERIFIED = "no pinned digest"


def _unverifiable(path: Path, pinned: PinnedFile) -> str:
    return (f"{path}: the loader reads this decompressed copy, but only the published bytes "
            f"of {pinned.name} are pinned, so it cannot be verified; remove it (the fetch "
            f"then downloads {pinned.name})")


def _ensure(entry: DatasetEntry, pinned: PinnedFile, dest: Path, bases: list[str],
            timeout: float, progress: IO[str] | None, attempts: int) -> None:
    target = dest / pinned.name
    if _keep_present(dest, pinned):
        return
    part = dest / (pinned.name + ".part")
    failures: list[str] = []
    mismatches: list[str] = []
    for base in bases:
        url = base + pinned.name
        try:
            _download(url, part, pinned, timeout, progress, attempts)
        except LocalFileError:           # writing here failed: no other source helps
            raise
        except _NETWORK_ERRORS as exc:   # URLError, HTTPError, timeout, reset, bad URL
            failures.append(f"{url}: {_reason(exc)}")
            continue
        try:
            check_file(part, pinned, name=pinned.name)
        except DataMismatch as exc:
            discard(part)
            mismatches.append(f"{' '.join(str(exc).split())} (from {url}; the bad file was "
                              f"removed)".replace(str(part), str(target)))
            continue
        commit(part, target)
        return
    if mismatches:
        raise DataMismatch("; ".join(mismatches))
    raise FetchError(_offline_message(entry, dest, failures))


def _download(url: str, part: Path, pinned: PinnedFile, timeout: float,
              progress: IO[str] | None, attempts: int) -> None:
    """Download ``url`` into ``part``, resuming what ``part`` already holds; retried (with
    ``Range``) while a try brings new bytes, at most ``attempts`` tries."""
    last: Exception | None = None
    for _ in range(max(attempts, 1)):
        before = resumable_size(part)
        try:
            _one_request(url, part, pinned, timeout, progress)
            return
        except LocalFileError:
            raise
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and before:       # "range not satisfiable": start over
                discard(part)
                last = exc
                continue
            raise
        except _NETWORK_ERRORS as exc:
            last = exc
            now = resumable_size(part)
            if now <= before:                    # no progress: give up on this source
                raise
    assert last is not None
    raise last


def _one_request(url: str, part: Path, pinned: PinnedFile, timeout: float,
                 progress: IO[str] | None) -> None:
    start = resumable_size(part)
    limit = largest_size(pinned, pinned.name)
    headers = {"User-Agent": "pfl-theory data fetch"}
    if start:
        headers["Range"] = f"bytes={start}-"
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        status = getattr(resp, "status", None)
        resumed = start > 0 and status == 206 and \
            (resp.headers.get("Content-Range") or "").startswith(f"bytes {start}-")
        if not resumed:
            start = 0
        length = resp.headers.get("Content-Length")
        expected = start + int(length) if length and length.isdigit() else None
        if limit is not None and expected is not None and expected > limit:
            raise ConnectionError(f"the server announces {expected} bytes, more than the "
                                  f"{limit} the pinned file can have")
        total = expected or pinned.size
        bar = _Progress(progress, pinned.name, total, start)
        got = start
        with open_part(part, append=resumed) as fh:
            while True:
                chunk = resp.read(_CHUNK)
                if not chunk:
                    break
                if limit is not None and got + len(chunk) > limit:
                    raise ConnectionError(f"the server sent more than the {limit} bytes "
                                          f"the pinned file can have")
                fh.write(chunk)
                got += len(chunk)
                bar.update(got)
            fh.finish()
        bar.close()
    if expected is not None and got < expected:
        raise ConnectionError(f"connection closed after {got} of {expected} bytes")


# ----------------------------------------------------------------------------- archives
def _verified(path: Path | None, pinned: PinnedFile) -> bool:
    if path is None:
        return False
    try:
        how = check_file(path, pinned)
    except DataMismatch:
        return False
    return how != _UNVERIFIED or not pinned.pinned


def _all_present(entry: DatasetEntry, dest: Path) -> bool:
    return all(_verified(find_file(dest, p), p) for p in entry.files)


def _extract(entry: DatasetEntry, dest: Path) -> None:
    """Unpack ``entry.files`` from the verified archive in ``dest``: each member to
    ``.part``, checked, renamed."""
    archive = dest / entry.archive.name
    with _open_archive(archive) as read_member:
        for pinned in entry.files:
            target = dest / pinned.name
            if _verified(find_file(dest, pinned), pinned):
                continue
            part = dest / (pinned.name + ".part")
            with read_member(pinned.member) as src, open_part(part, append=False) as out:
                out.writelines(iter(lambda: src.read(1 << 20), b""))
                out.finish()
            try:
                check_file(part, pinned, name=pinned.name)
            except DataMismatch:
                discard(part)
                raise
            commit(part, target)


@contextlib.contextmanager
def _open_archive(path: Path):
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path, "r:gz") as tar:
            def member(name: str):
                try:
                    fh = tar.extractfile(name)
                except KeyError:
                    fh = None
                if fh is None:
                    raise DataMismatch(f"{path}: no file {name!r} in the archive")
                return fh
            yield member
    else:
        with zipfile.ZipFile(path) as zf:
            def member(name: str):
                try:
                    return zf.open(name)
                except KeyError:
                    raise DataMismatch(f"{path}: no file {name!r} in the archive") from None
            yield member


# ----------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """Exclusive lock on ``dest/.pflt-fetch.lock`` (POSIX ``flock``; without ``fcntl`` —
    Windows — no lock: run one fetch per directory at a time)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    lock = dest / ".pflt-fetch.lock"
    try:     # never through a link planted as the lock (O_CREAT would create its target)
        fd = os.open(lock, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise LocalFileError(exc.errno, exc.strerror or str(exc), str(lock)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return _reason(exc.reason) if isinstance(exc.reason, BaseException) else str(exc.reason)
    if isinstance(exc, TimeoutError) or type(exc).__name__ == "timeout":
        return "timed out"
    return " ".join(str(exc).split()) or type(exc).__name__


def _offline_message(entry: DatasetEntry, dest: Path, failures: list[str]) -> str:
    files = ", ".join(f.name for f in entry.downloads)
    sources = entry.urls[0] if entry.urls else "the publisher"
    how = (f" and rerun pflt data fetch {entry.name} --dir {dest} to unpack it"
           if entry.archive else "")
    return (f"could not download {entry.name} ({'; '.join(failures)}); offline: put {files} "
            f"(from {sources}) in {dest}{how}, then check with: pflt data verify "
            f"{entry.name}:{dest}")


class _Progress:
    """``name  12.3/26.4 MB  46%  3.1 MB/s  ETA 5 s`` on one ``\\r``-rewritten line, at
    most 5 times a second."""

    def __init__(self, stream: IO[str] | None, name: str, total: int | None, start: int):
        self.stream, self.name, self.total, self.start = stream, name, total, start
        self.t0 = time.monotonic()
        self.shown = 0.0
        self.done = start

    def update(self, done: int, *, force: bool = False) -> None:
        self.done = done
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and now - self.shown < 0.2:
            return
        self.shown = now
        rate = (done - self.start) / max(now - self.t0, 1e-9)
        text = f"{self.name}  {done / 1e6:.1f}"
        if self.total:
            left = max(self.total - done, 0)
            eta = f"{left / rate:.0f} s" if rate > 0 else "?"
            text += (f"/{self.total / 1e6:.1f} MB  {100 * done / self.total:3.0f}%  "
                     f"{rate / 1e6:.1f} MB/s  ETA {eta}")
        else:
            text += f" MB  {rate / 1e6:.1f} MB/s  ETA ?"
        self.stream.write("\r" + text)
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.update(self.done, force=True)
            self.stream.write("\n")
            self.stream.flush()
