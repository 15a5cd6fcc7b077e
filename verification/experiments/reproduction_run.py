"""Run a reproduction's cells (resumably, in parallel processes) and collect its CSV.

Every cell is one ``python -m pflt run …`` process writing ``RUNS/NAME/CELL/``.  When it
ends, its row is appended to the CSV at once (so a cut-off session loses no finished cell):
``method, model, seed, metric, value, command`` as the issue asks, plus ``column``,
``best_value``/``best_round`` (the largest accuracy over the evaluated rounds, from
``history.csv``), ``rounds`` and ``status`` (``ok``, or ``exit N`` for a run that failed —
``value`` is then ``nan``, never a number that was not measured).  ``value`` is the
``metric`` key of the run's ``summary.json`` (last round), a fraction in [0, 1].

A cell whose exact command is already a row of the CSV is skipped; so is one whose run
directory already holds a finished run with the cell's options (its row is collected).
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verification.experiments.reproduction import Cell

FIELDS = ("method", "model", "seed", "metric", "value", "command", "column", "best_value",
          "best_round", "rounds", "status")


def read_rows(path) -> list[dict]:
    """The CSV's rows (``[]`` when the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    missing = {"method", "model", "seed", "metric", "value", "command"} - set(rows[0] if rows else FIELDS)
    if missing:
        raise ValueError(f"{path}: not a reproduction CSV (missing columns {sorted(missing)})")
    return rows


def append_row(path, row: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in FIELDS})


def collect(cell: Cell, run_dir, command: str, status: str = "ok") -> dict:
    """The CSV row of a finished cell from its run directory."""
    metric = cell.metric
    row = dict(method=cell.row.label, model=cell.column.model, seed=cell.seed, metric=metric,
               command=command, column=cell.column.key, rounds=cell.rounds, status=status,
               value="nan", best_value="nan", best_round="")
    if status != "ok":
        return row
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    if summary.get("round") != cell.rounds or metric not in summary:
        row["status"] = f"summary.json lacks round {cell.rounds} {metric}"
        return row
    row["value"] = repr(float(summary[metric]))
    best, best_t = -math.inf, None
    with (Path(run_dir) / "history.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            v = float(r[metric])
            if v > best:
                best, best_t = v, int(r["round"])
    row["best_value"], row["best_round"] = repr(best), best_t
    return row


def finished(run_dir, cell: Cell, argv: list[str]) -> bool:
    """Whether ``run_dir`` holds the finished run of exactly this cell's options."""
    run_dir = Path(run_dir)
    try:
        saved = json.loads((run_dir / "cell.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return saved.get("argv") == argv and summary.get("round") == cell.rounds


def subprocess_launch(argv: list[str], log_path: Path, env=None) -> int:
    """Run ``python -m pflt run ARGV`` as its own process, output to ``log_path``."""
    with open(log_path, "w") as fh:
        return subprocess.call([sys.executable, "-m", "pflt", "run", *argv], stdout=fh,
                               stderr=subprocess.STDOUT, env=env)


def run_cells(cells, csv_path, runs_root, data_dir=None, jobs: int = 1, log=print,
              launch=subprocess_launch) -> list[dict]:
    """Run the cells not yet in ``csv_path``, ``jobs`` at a time, each by
    ``launch(argv, log_path) -> exit code`` (default: its own process); returns the new rows."""
    done = {r["command"] for r in read_rows(csv_path)}
    lock = threading.Lock()
    todo = []
    for c in cells:
        out = str(Path(runs_root) / c.reproduction / c.run_name)
        if c.command(data_dir, out) not in done:
            todo.append((c, out))
    log(f"{len(cells) - len(todo)} of {len(cells)} cells already in {csv_path}; "
        f"running {len(todo)} with {jobs} process(es)")
    new_rows = []

    def one(item):
        c, out = item
        argv, command = c.argv(data_dir, out), c.command(data_dir, out)
        status = "ok"
        t0 = time.time()
        if not finished(out, c, argv):
            Path(out).mkdir(parents=True, exist_ok=True)
            rc = launch(argv, Path(out).parent / f"{c.run_name}.log")
            if rc == 0:
                (Path(out) / "cell.json").write_text(json.dumps({"argv": argv}))
            else:
                status = f"exit {rc}"
        else:
            log(f"{c.run_name}: finished run found in {out}, collected")
        row = collect(c, out, command, status)
        with lock:
            append_row(csv_path, row)
            new_rows.append(row)
        log(f"{c.run_name}: {row['metric']} = {row['value']} (best {row['best_value']}) "
            f"[{status}, {time.time() - t0:.0f} s]")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, todo))
    return new_rows
