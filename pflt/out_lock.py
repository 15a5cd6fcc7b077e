"""One writer per output directory: ``with out_lock(OUT): ...``.

The lock is the file ``OUT/.lock`` created exclusively (``O_CREAT | O_EXCL``) holding the
owner's host and process id.  A second run on the same ``OUT`` is refused with a
:class:`~pflt.cli.UserError` naming the owner.  A lock whose owner is gone (a killed run:
same host, process no longer alive) is stale: it is taken over with a warning, so a kill
never blocks the directory forever.  A lock from another host is honoured (its process
cannot be checked from here); the message says which file to delete.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
from pathlib import Path
from typing import Iterator

from pflt.cli import UserError

LOCK_NAME = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except (OverflowError, ValueError):
        return False
    return True


def _try_create(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        json.dump({"host": socket.gethostname(), "pid": os.getpid()}, fh)
    return True


def _owner(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def out_dir(text: str) -> str:
    """argparse ``type`` of every ``--out``: an empty string (``--out "$UNSET"``) is refused
    instead of silently meaning the current directory."""
    if not str(text).strip():
        raise argparse.ArgumentTypeError("empty output directory (it would write into the "
                                         "current directory); give a directory name")
    return str(text)


def out_path(text: str) -> Path:
    """:func:`out_dir` as a :class:`Path`."""
    return Path(out_dir(text))


def check_out_dir(out: str | Path) -> Path:
    """``out`` as a :class:`Path`; a :class:`~pflt.cli.UserError` if it exists and is not a
    directory (the same one-line message for every command that writes into ``--out``,
    instead of ``OUT: File exists`` from ``mkdir``)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    return out


def lock_holder(out: str | Path) -> int | None:
    """The process id of a live run holding ``OUT/.lock`` on this host, else ``None`` (no
    lock, a stale one, or one from another host: its process cannot be checked)."""
    path = Path(out) / LOCK_NAME
    if path.is_symlink() or not path.is_file():
        return None
    owner = _owner(path)
    pid = owner.get("pid")
    if (owner.get("host") == socket.gethostname() and isinstance(pid, int)
            and not isinstance(pid, bool) and _alive(pid)):
        return pid
    return None


@contextlib.contextmanager
def out_lock(out: str | Path) -> Iterator[Path]:
    """Hold ``OUT/.lock`` for the duration of the block (see module docstring)."""
    out = check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link, not a pflt lock; remove it or choose "
                        "another --out")
    for _ in range(2):
        if _try_create(path):
            break
        owner = _owner(path)
        pid, host = owner.get("pid"), owner.get("host")
        same_host = host == socket.gethostname()
        if same_host and isinstance(pid, int) and pid != os.getpid() and _alive(pid):
            raise UserError(f"{out} is in use by another run (process {pid}); wait for it or "
                            f"choose another --out")
        if not same_host and host is not None:
            raise UserError(f"{out} is locked by a run on host {host!r} (process {pid}); "
                            f"delete {path} if that run is gone")
        print(f"warning: removing the stale lock {path} of a run that is gone "
              f"(process {pid})", file=sys.stderr)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        raise UserError(f"cannot lock {out}: another run keeps creating {path}")
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            if _owner(path).get("pid") == os.getpid():
                path.unlink()
