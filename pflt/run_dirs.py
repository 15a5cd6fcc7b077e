"""Reading run directories and sweep directories for ``pflt compare`` (and sweeps).

A *run* is a directory written by ``pflt run`` (``history.json`` / ``history.jsonl``,
``summary.json``, ``.lock`` while it runs, ``diverged.json`` when it diverged).  Every run
has a status (:func:`run_status`):

* ``finished`` — ``summary.json`` written and the history reaches the configured rounds;
* ``diverged`` — stopped by the divergence contract (``diverged.json``, or a non-finite
  evaluation in its history);
* ``running`` — another process holds the run's ``.lock`` right now;
* ``unfinished`` — anything else (killed, interrupted, fewer rounds than configured).

Two values per run and metric (:meth:`Run.value`): ``last`` (the final evaluation) and
``best`` (the best evaluated round: the largest ``*accuracy*``, the smallest ``*loss*`` —
the papers' tables, pFedMe's Table 1 among them, report the best round; it is chosen on the
test split, so it is optimistic).

Every file is read defensively (:func:`load_run`, :func:`sweep_points`): a malformed one is
a ``ValueError`` naming the file and the key, never a traceback.  The same directory given
twice is counted once (:func:`deduplicate`), and so is a *copy* of a run — another
directory with the same configuration and seed, which would otherwise be averaged as a
second seed (:func:`deduplicate_runs`); a sweep's points are always resolved inside the
sweep directory.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Iterable

#: configuration keys that are not part of the configuration (they vary within a group)
IGNORED = {"seed", "out", "device", "threads", "wall_seconds", "eval_every",
           "checkpoint_every", "no_progress"}
_MAX_DEPTH = 20   # configurations nest 2-3 levels; deeper input is malformed


@dataclass
class Run:
    """One run: its directory, flattened configuration, seed, history and status."""

    path: Path
    config: dict[str, Any]
    seed: int
    entries: list[dict[str, Any]]
    final: dict[str, float]
    status: str = "finished"
    why: str = ""

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def key(self) -> str:
        """The configuration without the seed, as a canonical string."""
        return json.dumps(self.config, sort_keys=True, default=str)

    def value(self, metric: str, at: str = "last") -> float | None:
        """The run's ``last`` or ``best`` value of ``metric`` (``None`` if never evaluated;
        ``best`` only for accuracies, highest, and losses, lowest)."""
        if at == "last":
            v = self.final.get(metric)
            return v if v is not None else _last(self.entries, metric)
        if "accuracy" not in metric and "loss" not in metric:
            return None                  # no direction: "best" is undefined
        series = [e[metric] for e in self.entries if _number(e.get(metric))]
        series = [float(v) for v in series if math.isfinite(float(v))]
        if not series:
            return None
        return min(series) if "loss" in metric else max(series)


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type (``null``, ``number``, ``string``, ``list``,
    ``object``, ``boolean``), for error messages about a file's content."""
    names = {type(None): "null", bool: "boolean", int: "number", float: "number",
             str: "string", list: "list", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _last(entries: list[dict[str, Any]], metric: str) -> float | None:
    for e in reversed(entries):
        if _number(e.get(metric)):
            return float(e[metric])
    return None


def _flatten(d: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    if depth > _MAX_DEPTH:
        raise ValueError(f"{prefix.rstrip('.')} is nested more than {_MAX_DEPTH} levels deep")
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}.", depth + 1))
        else:
            out[prefix + str(k)] = v
    return out


def run_config(history_config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Flattened configuration (without seed and bookkeeping) and seed of a run."""
    flat = _flatten(history_config)
    seed = flat.get("seed", 0)
    if not _number(seed) or seed != int(seed):
        raise ValueError(f"config.seed is {json.dumps(seed, default=str)}, not an integer")
    config = {k: v for k, v in flat.items()
              if k.split(".")[-1] not in IGNORED and not k.startswith("data.seed")}
    return config, int(seed)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to be a pflt file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a UTF-8 JSON file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def _history(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config, entries)`` of ``path/history.json`` (+ ``history.jsonl``), validated."""
    from algorithms.engine.run_files import read_history   # history.json + history.jsonl

    hist_path = path / "history.json"
    try:
        hist = read_history(path)
    except RecursionError:
        raise ValueError(f"{hist_path} is nested too deeply to be a pflt history") from None
    except UnicodeDecodeError:
        raise ValueError(f"{hist_path} is not a UTF-8 JSON file") from None
    config, entries = hist.get("config", {}), hist.get("entries", [])
    if not isinstance(config, dict):
        raise ValueError(f"{hist_path}: key 'config' is {json_type(config)}, not an object")
    if not isinstance(entries, list):
        raise ValueError(f"{hist_path}: key 'entries' is {json_type(entries)}, not a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"{hist_path} (or history.jsonl): entries[{i}] is "
                             f"{json.dumps(e, default=str)[:40]}, not an object")
        if not _number(e.get("round")):
            raise ValueError(f"{hist_path} (or history.jsonl): entries[{i}].round is "
                             f"{json.dumps(e.get('round'), default=str)[:40]}, not a number")
    return config, entries


def run_status(path: Path, config: dict[str, Any], entries: list[dict[str, Any]],
               has_summary: bool) -> tuple[str, str]:
    """``(status, why)`` of the run in ``path`` (see the module docstring)."""
    from pflt.out_lock import lock_holder

    pid = lock_holder(path)
    if pid is not None:
        return "running", f"process {pid} holds {path / '.lock'}"
    if (path / "diverged.json").is_file():
        return "diverged", "diverged.json"
    if any(_number(v) and not math.isfinite(float(v)) and k.endswith(("_accuracy", "_loss"))
           for e in entries for k, v in e.items()):
        return "diverged", "a non-finite evaluation in its history"
    rounds = config.get("rounds")
    done = max((int(e["round"]) for e in entries), default=0)
    if not has_summary:
        return "unfinished", "no summary.json (killed or interrupted)"
    if _number(rounds) and done < rounds:
        return "unfinished", f"its history ends at round {done} of {int(rounds)}"
    return "finished", ""


def load_run(path: str | Path) -> Run:
    """Read the run in ``path`` (``history.json`` required, ``summary.json`` optional);
    a malformed file is a ``ValueError`` naming it and the key."""
    path = Path(path)
    if not (path / "history.json").is_file():
        raise FileNotFoundError(f"{path} is not a run directory (no history.json); "
                                "pass directories written by `pflt run`")
    raw_config, entries = _history(path)
    try:
        config, seed = run_config(raw_config)
    except ValueError as exc:
        raise ValueError(f"{path / 'history.json'}: {exc}") from None
    summary_path = path / "summary.json"
    final: dict[str, float] = {}
    if summary_path.is_file():
        summary = _read_json(summary_path)
        if not isinstance(summary, dict):
            raise ValueError(f"{summary_path} holds {json_type(summary)}, not an object")
        final = {k: float(v) for k, v in summary.items() if _number(v)}
    status, why = run_status(path, raw_config, entries, summary_path.is_file())
    if status != "finished":
        final = {}
    return Run(path, config, seed, entries, final, status, why)


_POINT = re.compile(r"point-\d+")


def sweep_points(sweep_dir: Path) -> list[Path]:
    """The point directories recorded in ``sweep_dir/sweep.jsonl``, always resolved inside
    ``sweep_dir`` (records store ``point-<i>`` relative to it; older ones an absolute or
    start-directory-relative path, of which only the ``point-<i>`` name is used — so a
    copied or moved sweep reads its own points).  Read only: a torn last line is skipped."""
    log = sweep_dir / "sweep.jsonl"
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(log)) from None
    found: list[Path] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            if n == len(lines):
                continue                 # an interrupted append: that point is unfinished
            raise ValueError(f"{log} line {n} is not JSON") from None
        where = rec.get("out") if isinstance(rec, dict) else None
        if not isinstance(where, str) or not _POINT.fullmatch(PurePath(where).name):
            raise ValueError(f"{log} line {n}: key 'out' is {json.dumps(where)[:60]}, not "
                             "a point-<i> directory of this sweep")
        point = sweep_dir / PurePath(where).name
        if point.is_symlink() or not point.is_dir():
            raise ValueError(f"{log} line {n}: {point} is missing (or a link)")
        found.append(point)
    return found


def expand_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories from the arguments: a sweep directory (with ``sweep.jsonl``) stands
    for all its points."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist")
        if not (p / "history.json").exists() and (p / "sweep.jsonl").is_file():
            out.extend(sweep_points(p))
        else:
            out.append(p)
    return out


def deduplicate(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """``paths`` without repeats of the same directory (the same inode: a path given twice,
    ``a`` and ``./a``, a symbolic link to it) and one note per repeat."""
    seen: dict[tuple[int, int], Path] = {}
    kept, notes = [], []
    for p in paths:
        try:
            st = os.stat(p)
            ident = (st.st_dev, st.st_ino)
        except OSError:
            ident = (-1, hash(str(Path(p).resolve())))
        if ident in seen:
            notes.append(f"note: {p} is the same run as {seen[ident]}; counted once")
            continue
        seen[ident] = p
        kept.append(p)
    return kept, notes


def deduplicate_runs(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``runs`` with one run per (configuration, seed) — a copied run directory, a copy
    of a copy, a link to one (whatever its path) is the same run, not another seed — and
    one note per run left out.  The first finished run of each pair is kept (an
    unfinished copy never replaces a finished one), in the order given."""
    kept: dict[tuple[str, int], Run] = {}
    notes: list[str] = []
    for r in runs:
        ident = (r.key, r.seed)
        first = kept.get(ident)
        if first is None:
            kept[ident] = r
            continue
        keep, drop = (r, first) if r.finished and not first.finished else (first, r)
        kept[ident] = keep
        notes.append(f"note: {drop.path} has the same configuration and seed ({r.seed}) as "
                     f"{keep.path}: one run (a copy), counted once")
    order = {id(r): i for i, r in enumerate(runs)}
    return sorted(kept.values(), key=lambda r: order[id(r)]), notes
