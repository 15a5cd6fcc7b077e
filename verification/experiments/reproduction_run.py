"""Run a reproduction's cells (resumably, in parallel processes) and collect its CSV.

Every cell is one ``pflt run …`` writing ``RUNS/NAME/CELL/``.  When it ends, its row
replaces any earlier row of the same command in the CSV at once — the CSV is rewritten
atomically, so a kill leaves the previous complete file, and a cut-off session loses no
finished cell: ``method, model, seed, metric, value, command`` as the issue asks, plus
``column``, ``best_value``/``best_round`` (the largest accuracy over the evaluated rounds,
from ``history.csv``), ``rounds``, ``status`` (``ok``, or ``exit N`` for a run that failed:
``value`` is then ``nan``, never a number that was not measured), ``k_hat`` (the K that
CGPFL-Heur's e(K) chose, from ``summary.json``; empty for other methods), ``options`` (the
``pflt reproduce --option`` replacements in the command, ``key=value, …``) and ``reason``
(a failed cell's one-line reason, from its log).  ``value`` is the ``metric`` key of the
run's ``summary.json`` (last round), a fraction in [0, 1].

A cell whose exact command is a row of the CSV with status ``ok`` is done (``force``
re-runs it); a failed one runs again.  A run directory that already holds the finished run
of the cell's options is collected without running.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pfl_theory.safe_files import atomic_write_text
from verification.experiments.reproduction import Cell

FIELDS = ("method", "model", "seed", "metric", "value", "command", "column", "best_value",
          "best_round", "rounds", "status", "k_hat", "options", "reason", "mu_band")
REQUIRED = ("method", "model", "seed", "metric", "value", "command")


def read_rows(path) -> list[dict]:
    """The CSV's rows (``[]`` when the file does not exist), every field of :data:`FIELDS`
    present (``""`` where an older CSV lacks the column); ``ValueError`` naming the file for
    anything that is not a reproduction CSV."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            header = reader.fieldnames
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a reproduction CSV (not UTF-8 text at byte "
                         f"{exc.start})") from None
    except csv.Error as exc:
        raise ValueError(f"{path}: not a reproduction CSV ({exc})") from None
    if header is None:          # an empty file
        return []
    missing = set(REQUIRED) - set(header)
    if missing:
        raise ValueError(f"{path}: not a reproduction CSV (missing columns {sorted(missing)})")
    return [{**{k: "" for k in FIELDS}, **{k: ("" if v is None else v) for k, v in r.items()
                                          if k is not None}} for r in rows]


def write_rows(path, rows: list[dict]) -> None:
    """Replace the CSV by ``rows`` atomically (a kill leaves the previous file)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in FIELDS})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, buf.getvalue())


def put_row(path, row: dict) -> None:
    """Write ``row``, replacing any earlier row of the same command."""
    rows = [r for r in read_rows(path) if r["command"] != row["command"]]
    write_rows(path, rows + [row])


def done_commands(rows: list[dict]) -> set[str]:
    """The commands of the rows that finished (status ``ok``)."""
    return {r["command"] for r in rows if r.get("status", "ok") in ("ok", "")}


def collect(cell: Cell, run_dir, command: str, status: str = "ok", reason: str = "") -> dict:
    """The CSV row of a finished cell from its run directory."""
    metric = cell.metric
    row = dict(method=cell.row.label, model=cell.column.model, seed=cell.seed, metric=metric,
               command=command, column=cell.column.key, rounds=cell.rounds, status=status,
               value="nan", best_value="nan", best_round="", k_hat="",
               options=cell.options_text, reason=reason)
    if status != "ok":
        return row
    try:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
        if summary.get("round") != cell.rounds or metric not in summary:
            raise ValueError(f"summary.json lacks round {cell.rounds} {metric}")
        value = float(summary[metric])
        best, best_t = -math.inf, None
        with (Path(run_dir) / "history.csv").open(newline="") as fh:
            for r in csv.DictReader(fh):
                v = float(r[metric])
                if v > best:
                    best, best_t = v, int(r["round"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        row["status"], row["reason"] = "incomplete", f"{run_dir}: {exc}"[:400]
        return row
    row["value"], row["best_value"], row["best_round"] = repr(value), repr(best), best_t
    if summary.get("k_hat") is not None:
        row["k_hat"] = str(int(summary["k_hat"]))
    if summary.get("mu") is not None:      # CGPFL-Heur: μ used and K̂'s band of μ
        row["mu_band"] = (f"mu = {summary['mu']:.4g} in [{summary.get('mu_band_lo', 0):.4g}, "
                          f"{summary.get('mu_band_hi', math.inf):.4g})")
    return row


def failure_reason(log_path, rc: int) -> str:
    """One line saying why a cell's run failed: a signal that killed it, else the last
    ``error:`` line of its log (else its last line)."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-rc} ({name})"
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        text = ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    line = errors[-1].split("error:", 1)[1].strip() if errors else (
        lines[-1] if lines else "no output")
    return line[:400]


def finished(run_dir, cell: Cell, argv: list[str]) -> bool:
    """Whether ``run_dir`` holds the finished run of exactly this cell's options."""
    run_dir = Path(run_dir)
    try:
        saved = json.loads((run_dir / "cell.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return saved.get("argv") == argv and summary.get("round") == cell.rounds


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies (``PR_SET_PDEATHSIG``), and exit
    now if the parent is already gone: the cells of a killed ``pflt reproduce --jobs J`` stop
    with it instead of writing on into run directories the next invocation runs again."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):       # not Linux: the parent's kill leaves it running
        pass
    if os.getppid() != parent:
        os._exit(137)


_CHILD = ("import runpy, sys; from verification.experiments.reproduction_run import "
          "die_with_parent; die_with_parent(int(sys.argv[1])); sys.argv = ['pflt', "
          "*sys.argv[2:]]; runpy.run_module('pflt', run_name='__main__', alter_sys=True)")


def subprocess_launch(argv: list[str], log_path: Path, env=None) -> int:
    """Run ``pflt run ARGV`` as its own process (which dies with this one), output to
    ``log_path``."""
    with open(log_path, "w") as fh:
        return subprocess.call([sys.executable, "-c", _CHILD, str(os.getpid()), "run", *argv],
                               stdout=fh, stderr=subprocess.STDOUT, env=env)


def pending(cells, csv_path, runs_root, data_dir=None, force: bool = False) -> list:
    """``[(cell, run directory)]`` of the cells to run: not finished in the CSV (all with
    ``force``)."""
    done = set() if force else done_commands(read_rows(csv_path))
    todo = []
    for c in cells:
        out = str(Path(runs_root) / c.reproduction / c.run_name)
        if c.command(data_dir, out) not in done:
            todo.append((c, out))
    return todo


def run_cells(cells, csv_path, runs_root, data_dir=None, jobs: int = 1, log=print,
              launch=subprocess_launch, force: bool = False) -> list[dict]:
    """Run the cells not finished in ``csv_path`` (every cell with ``force``), ``jobs`` at a
    time, each by ``launch(argv, log_path) -> exit code`` (default: its own process); returns
    the new rows (failed ones with ``status`` ≠ ``ok`` and their ``reason``)."""
    lock = threading.Lock()
    todo = pending(cells, csv_path, runs_root, data_dir, force)
    log(f"{len(cells) - len(todo)} of {len(cells)} cells already in {csv_path}; "
        f"running {len(todo)} with {jobs} process(es)")
    new_rows = []

    def one(item):
        c, out = item
        argv, command = c.argv(data_dir, out), c.command(data_dir, out)
        status, reason = "ok", ""
        t0 = time.time()
        if force or not finished(out, c, argv):
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "cell.json").unlink(missing_ok=True)   # not finished until it ends
            log_path = Path(out).parent / f"{c.run_name}.log"
            rc = launch(argv, log_path)
            if rc == 0:
                (Path(out) / "cell.json").write_text(json.dumps({"argv": argv}))
            else:
                status, reason = f"exit {rc}", failure_reason(log_path, rc)
        else:
            log(f"{c.run_name}: finished run found in {out}, collected")
        row = collect(c, out, command, status, reason)
        with lock:
            put_row(csv_path, row)
            new_rows.append(row)
        log(f"{c.run_name}: {row['metric']} = {row['value']} (best {row['best_value']}) "
            f"[{row['status']}{': ' + row['reason'] if row['reason'] else ''}, "
            f"{time.time() - t0:.0f} s]")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, todo))
    return new_rows
