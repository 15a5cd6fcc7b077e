"""The form of every file a run directory holds, checked when the toolkit reads it back.

A run directory (``algorithms.engine.runner.run(out_dir=…)``, ``pflt run --out``) holds
``history.json`` (``{"config", "entries", "initial_evaluation"}``), ``history.jsonl`` (one
entry per line), ``history.csv``, ``checkpoint.pt`` (:mod:`algorithms.engine.checkpoint`) and, from
``pflt run``, ``run_options.json`` and ``summary.json``.  Any of them can be edited, cut
short or replaced by hand; a reader that trusts them ends in a traceback or, worse, in a
silent wrong number.  Every reader goes through this module: a file that does not have the
expected form raises :class:`RunFileError` (a ``ValueError``) whose message names the file
and the key — ``…/history.json: entries[3]: expected an object, got 7`` — and that the
command line reports as one line (exit 2).

The checks are about *form* (presence and JSON type of each key, entries ordered by round);
whether the contents belong together (the checkpoint and the options of the same run) is
checked by :mod:`algorithms.engine.resume`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: a JSON type name → the Python types that :func:`json.loads` gives for it
KINDS: dict[str, tuple[type, ...]] = {
    "an integer": (int,), "a number": (int, float), "a string": (str,),
    "true or false": (bool,), "an object": (dict,), "a list": (list,),
}


class RunFileError(ValueError):
    """A run file that does not have the expected form; ``path`` and ``key`` say where."""

    def __init__(self, path: str | Path, key: str | None, problem: str):
        self.path, self.key = Path(path), key
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_kind(value: Any, kind: str) -> bool:
    """``value`` is of the JSON ``kind`` (a key of :data:`KINDS`); booleans are not numbers."""
    if isinstance(value, bool) and kind != "true or false":
        return False
    return isinstance(value, KINDS[kind])


def need(path: str | Path, data: dict, key: str, kind: str, *, where: str = "",
         optional: bool = False, nullable: bool = False) -> Any:
    """``data[key]``, which must be of ``kind`` (or ``None`` if ``nullable``; absent if
    ``optional``: then ``None``); else :class:`RunFileError` naming ``where + key``."""
    name = f"{where}{key}"
    if key not in data:
        if optional:
            return None
        raise RunFileError(path, name, "missing")
    value = data[key]
    if value is None and nullable:
        return None
    if not is_kind(value, kind):
        raise RunFileError(path, name, f"expected {kind}, got {_shown(value)}")
    return value


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path``; :class:`RunFileError` for a file that is not UTF-8 JSON
    (``OSError`` for one that cannot be read at all)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise RunFileError(path, None, "not a UTF-8 text (JSON) file") from None
    except json.JSONDecodeError as exc:
        raise RunFileError(path, None, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise RunFileError(path, None, "nested too deeply to be a run file") from None


def read_object(path: str | Path) -> dict:
    """A JSON file holding an object (``run_options.json``, ``summary.json``)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise RunFileError(path, None, f"expected a JSON object, got {_shown(data)}")
    return data


def check_entry(path: str | Path, entry: Any, where: str) -> dict:
    """One history entry: an object with an integer ``round`` >= 0 whose accuracies and
    losses (``*_accuracy``, ``*_loss``) are numbers (NaN/inf allowed: a diverged run's
    last entry) and whose per-client accuracies (``*_client_accuracy``) are lists of
    numbers."""
    if not isinstance(entry, dict):
        raise RunFileError(path, where, f"expected an object, got {_shown(entry)}")
    rnd = need(path, entry, "round", "an integer", where=f"{where}.")
    if rnd < 0:
        raise RunFileError(path, f"{where}.round", f"must be >= 0, got {rnd}")
    for key, value in entry.items():
        if key.endswith("_client_accuracy"):          # the per-client vector
            if not (isinstance(value, list) and all(is_kind(v, "a number") for v in value)):
                raise RunFileError(path, f"{where}.{key}",
                                   f"expected a list of numbers, got {_shown(value)}")
        elif key.endswith(("_accuracy", "_loss")) and not is_kind(value, "a number"):
            raise RunFileError(path, f"{where}.{key}", f"expected a number, got {_shown(value)}")
    return entry


def check_entries(path: str | Path, entries: Any, where: str = "entries") -> list[dict]:
    """A list of history entries with strictly increasing rounds."""
    if not isinstance(entries, list):
        raise RunFileError(path, where, f"expected a list of entries, got {_shown(entries)}")
    last = -1
    for i, entry in enumerate(entries):
        check_entry(path, entry, f"{where}[{i}]")
        if entry["round"] <= last:
            raise RunFileError(path, f"{where}[{i}].round",
                               f"round {entry['round']} after round {last} (not increasing)")
        last = entry["round"]
    return entries


def check_history(path: str | Path, data: Any) -> dict:
    """``history.json``: ``config`` (an object), ``entries`` (:func:`check_entries`),
    ``initial_evaluation`` (an object of numbers; absent in old files)."""
    if not isinstance(data, dict):
        raise RunFileError(path, None, f"expected a history object, got {_shown(data)}")
    need(path, data, "config", "an object")
    check_entries(path, need(path, data, "entries", "a list"))
    initial = need(path, data, "initial_evaluation", "an object", optional=True) or {}
    for key, value in initial.items():
        if not is_kind(value, "a number"):
            raise RunFileError(path, f"initial_evaluation.{key}",
                               f"expected a number, got {_shown(value)}")
    return data


def read_history_lines(path: str | Path) -> list[dict]:
    """The entries of ``history.jsonl`` (one JSON object per line).  A last line without
    its newline (a write cut short by a kill) is left out; any other line that is not an
    entry is a :class:`RunFileError` naming its line number."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError:
        raise RunFileError(path, None, "not a UTF-8 text (JSON lines) file") from None
    entries: list[dict] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            if i == len(lines) - 1:      # no newline yet: the write was cut short
                break
            raise RunFileError(path, f"line {i + 1}", f"not valid JSON ({exc})") from None
        entries.append(check_entry(path, entry, f"line {i + 1}"))
    check_entries(path, entries, "lines")
    return entries


def read_summary(path: str | Path) -> dict:
    """``summary.json``: an object with an integer ``round`` whose values are scalars
    (numbers, strings, booleans or null)."""
    data = read_object(path)
    need(path, data, "round", "an integer")
    for key, value in data.items():
        if isinstance(value, (dict, list)):
            raise RunFileError(path, key, f"expected a scalar, got {_shown(value)}")
    return data


#: the append-only history of a run directory: one JSON object (an entry) per line
HISTORY_LINES = "history.jsonl"


def read_history(out_dir: str | Path) -> dict[str, Any]:
    """``{"config", "entries", "initial_evaluation"}`` of the run directory ``out_dir``:
    ``history.json`` with the entries of ``history.jsonl`` when that exists (it has every
    evaluation, ``history.json`` those up to its last full write).  A last line cut short
    by a kill mid-write is left out; ``FileNotFoundError`` without ``history.json``, a
    :class:`RunFileError` (``ValueError``) naming the file and key for
    a file that is not a history (:mod:`algorithms.engine.run_files`)."""
    out = Path(out_dir)
    path = out / "history.json"
    data = check_history(path, read_json(path))
    lines_path = out / HISTORY_LINES
    if lines_path.is_file():
        data["entries"] = read_history_lines(lines_path)
    return data
