"""Reading a ``pflt sweep`` TOML file: every value checked against the user's file before
anything is written (one-line errors naming the file and the key), and the grid's size
known — and refused when too large — before any cell is validated.

What a sweep file may hold: numbers, strings, booleans and lists of them (a ``[sweep]``
list per swept option), the tables ``[hyperparameters]``, ``[data]``, ``[run]``,
``[sweep]`` and ``[algorithms.<registered algorithm>]``.  TOML dates and times, tables
elsewhere, lists of tables and nesting deeper than these are refused.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

from pflt.cli import UserError

#: the largest grid a sweep accepts: each point is one ``pflt run`` (seconds to hours), and
#: every point is validated before the first runs (2-23 ms a point measured on the shared
#: 2-core CI box, 2026-11-26: 2,000 points take 4-46 s, announced on stderr)
MAX_POINTS = 2000
#: tables a run configuration may hold (see :func:`pflt.commands.run_options.load_config`)
RUN_TABLES = ("hyperparameters", "data", "run")


def _scalar(value: Any, path: Path, key: str) -> None:
    if isinstance(value, (datetime.date, datetime.time)):   # datetime is a date
        raise UserError(f"{path}: {key} = {value} is a TOML date/time; options are numbers, "
                        "strings, booleans or lists of them")
    if isinstance(value, dict):
        raise UserError(f"{path}: {key} is a table; a value or a list of values is expected")
    if isinstance(value, list):
        raise UserError(f"{path}: {key} holds a nested list; lists hold single values")


def check_values(raw: dict, path: Path) -> None:
    """Every value of the sweep file is a scalar or a list of scalars, in a table where a
    table may be (see the module docstring)."""
    for key, value in raw.items():
        if key == "algorithms":
            if not isinstance(value, dict):
                raise UserError(f"{path}: [algorithms] must hold one table per algorithm, "
                                "e.g. [algorithms.pfedme]")
            for name, table in value.items():
                if not isinstance(table, dict):
                    raise UserError(f"{path}: algorithms.{name} must be a table of "
                                    "hyper-parameters, e.g. [algorithms.{name}]")
                _check_table(table, path, f"algorithms.{name}")
        elif key == "sweep" or (key in RUN_TABLES and isinstance(value, dict)):
            if not isinstance(value, dict):
                raise UserError(f"{path}: [sweep] must be a table of lists, e.g. [sweep] "
                                "seed = [0, 1]")
            _check_table(value, path, key)
        elif isinstance(value, list):
            for v in value:
                _scalar(v, path, key)
        else:
            _scalar(value, path, key)


def _check_table(table: dict, path: Path, where: str) -> None:
    for key, value in table.items():
        for v in value if isinstance(value, list) else [value]:
            _scalar(v, path, f"{where}.{key}")


def check_algorithm_tables(per_algorithm: dict, used: set[str], path: Path) -> None:
    """Every ``[algorithms.<name>]`` names a registered algorithm that the sweep runs (a
    typo'd or unused table would be silently ignored)."""
    from algorithms.engine.base import registry

    known = registry()
    for name in per_algorithm:
        if name not in known:
            raise UserError(f"{path}: [algorithms.{name}] is not a registered algorithm "
                            f"(known: {', '.join(sorted(known))})")
        if name not in used:
            raise UserError(f"{path}: [algorithms.{name}] is never used: the sweep runs "
                            f"{', '.join(sorted(used))} (add it to [sweep] algorithm?)")


def grid_size(sweep: dict, per_algorithm: dict, base_algorithm: str) -> int:
    """The number of points :func:`pflt.commands.sweep.grid` would build, computed from the
    list lengths alone (no point is built)."""
    lengths = {k: len(v) if isinstance(v, list) else 1 for k, v in sweep.items()}
    algorithms = sweep.get("algorithm", [base_algorithm])
    algorithms = algorithms if isinstance(algorithms, list) else [algorithms]
    others = math.prod(n for k, n in lengths.items() if k != "algorithm")
    total = 0
    for name in algorithms:
        table = per_algorithm.get(name, {}) if isinstance(name, str) else {}
        total += others * math.prod(len(v) for v in table.values()
                                    if isinstance(v, list) and v)
    return total


def check_size(sweep: dict, per_algorithm: dict, base_algorithm: str, path: Path) -> int:
    """:func:`grid_size`, refused above :data:`MAX_POINTS` with the product that made it."""
    n = grid_size(sweep, per_algorithm, base_algorithm)
    if n > MAX_POINTS:
        shape = " × ".join(f"{len(v)} {k}" for k, v in sweep.items()
                           if isinstance(v, list) and len(v) > 1)
        raise UserError(f"{path}: the grid has {n} points ({shape or 'per-algorithm lists'}),"
                        f" more than {MAX_POINTS}; split it into several sweeps")
    return n


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)


def _key(key: str) -> str:
    import json
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def to_toml(raw: dict) -> str:
    """The base options as TOML (what each cell's ``--config`` reads)."""
    lines, tables = [], []
    for k, v in raw.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            lines.append(f"{_key(k)} = {_toml_value(v)}")
    for name, table in tables:
        lines.append(f"[{_key(name)}]")
        lines.extend(f"{_key(k)} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"
