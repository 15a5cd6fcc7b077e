"""Outputs written elsewhere first, then published into ``--out`` in one step.

``pflt verify`` and ``pflt figures`` run code that writes many files (every check's and
figure module's PNGs and CSVs).  ``with staged(OUT, "verify") as stage:`` gives them a fresh
directory ``OUT/.pflt-staging-<pid>-<random>/`` to write into; when the block succeeds,
:func:`publish` moves each file to the same relative name under ``OUT`` (a rename each: no
copy, no extra disk) and the staging directory is removed.  When the block fails (a full
disk, Ctrl-C, an error), only the staging directory is removed: ``OUT`` keeps the previous
outputs untouched.

Replacing the previous outputs never deletes what this command did not create: the names
it published are recorded in ``OUT/.pflt-<command>-files.json``; a later run removes the
recorded files it does not write again (only regular files, only below ``OUT``, never
through a link; directories only when left empty).  Files that a user put in ``OUT`` —
``OUT/figures/notes.txt`` included — are never removed; a user file at one of the names
the command writes is replaced.  Destinations are never written through symbolic links
(:mod:`pfl_theory.safe_files`): a link at a published name, or a linked directory on the
way, is refused with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from pfl_theory.safe_files import UnsafeOutputError, atomic_write_text, refuse_link, safe_subdir

STAGING_PREFIX = ".pflt-staging-"
#: a file inside every staging directory: only directories holding it are ever cleaned up
STAGING_MARK = ".pflt-staging"


def manifest_path(out: Path, command: str) -> Path:
    return Path(out) / f".pflt-{command}-files.json"


def _recorded(out: Path, command: str) -> list[str]:
    """The relative names the previous run of ``command`` published (``[]`` if unknown)."""
    path = manifest_path(out, command)
    if path.is_symlink() or not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    names = data.get("files") if isinstance(data, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _inside(out: Path, name: str) -> Path | None:
    """``out/name`` if ``name`` is a plain relative path whose every directory below ``out``
    is a real directory (no link, no ``..``); else ``None``."""
    rel = Path(name)
    if not name or rel.is_absolute() or ".." in rel.parts:
        return None
    path = out
    for part in rel.parts[:-1]:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return None
    return path / rel.parts[-1]


def _remove_stale(out: Path, names: list[str]) -> None:
    for name in names:
        path = _inside(out, name)
        if path is None or path.is_symlink() or not path.is_file():
            continue
        path.unlink()
        parent = path.parent
        while parent != out and not parent.is_symlink():
            try:
                parent.rmdir()          # only if empty: user files keep their directory
            except OSError:
                break
            parent = parent.parent


def _clean_old_stages(out: Path) -> None:
    """Remove staging directories of killed runs (marked ones only: ``OUT`` is locked, so
    no live run owns one)."""
    for old in out.glob(STAGING_PREFIX + "*"):
        if old.is_dir() and not old.is_symlink() and (old / STAGING_MARK).is_file():
            shutil.rmtree(old, ignore_errors=True)


def publish(stage: Path, out: Path, command: str, *, keep_previous: bool = False
            ) -> list[Path]:
    """Move every file of ``stage`` to the same relative name under ``out``; remove the
    files the previous run of ``command`` recorded and did not write again (unless
    ``keep_previous``: a partial run, e.g. a figure module that failed, keeps them and
    they stay recorded); record the names.  Returns the published paths."""
    names = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.name != STAGING_MARK)
    # every destination checked before anything moves: a refusal leaves OUT as it was
    for name in names:
        parent = Path(name).parent
        for depth in range(1, len(parent.parts) + 1):
            sub = out.joinpath(*parent.parts[:depth])
            refuse_link(sub)
            if sub.exists() and not sub.is_dir():
                raise UnsafeOutputError(f"{sub} exists and is not a directory")
        refuse_link(out / name)
        if (out / name).is_dir():
            raise UnsafeOutputError(f"{out / name} is a directory; pflt writes a file there")
    previous = _recorded(out, command)
    manifest = manifest_path(out, command)
    refuse_link(manifest)
    # the new record is written while still aside (a full disk fails here, OUT untouched);
    # from here on only renames, which need no space
    recorded = sorted(set(names) | set(previous)) if keep_previous else names
    staged_manifest = atomic_write_text(stage / manifest.name, json.dumps(
        {"command": f"pflt {command}", "files": recorded}, indent=1))
    published = []
    for name in names:
        dest_dir = safe_subdir(out, Path(name).parent) if Path(name).parent.parts else out
        dest = refuse_link(dest_dir / Path(name).name)
        os.replace(stage / name, dest)
        published.append(dest)
    os.replace(staged_manifest, manifest)
    if not keep_previous:
        _remove_stale(out, [n for n in previous if n not in set(names)])
    return published


class Stage(type(Path())):
    """The staging directory (a :class:`~pathlib.Path`); set ``keep_previous = True`` in
    the block to keep the previous run's files that this one did not write again."""

    keep_previous = False


@contextlib.contextmanager
def staged(out: Path, command: str) -> Iterator[Stage]:
    """A fresh staging directory inside ``out`` (which the caller has locked); published on
    success, removed in every case (see the module docstring)."""
    out = Path(out)
    _clean_old_stages(out)
    stage = Stage(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=out))
    try:
        (stage / STAGING_MARK).write_text(f"temporary output of pflt {command}; safe to delete\n")
        yield stage
        publish(stage, out, command, keep_previous=stage.keep_previous)
    except OSError as exc:         # a failed write names the output, not the staging copy
        raise _as_output(exc, stage, out) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _as_output(exc: OSError, stage: Path, out: Path) -> OSError:
    """``exc`` with a file name inside ``stage`` replaced by the same name under ``out``
    (what the user asked for: ``OUT/results.json``, not the staging directory's copy)."""
    name = exc.filename
    if not name:
        return exc
    try:
        rel = Path(name).relative_to(stage)
    except ValueError:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(out / rel))
