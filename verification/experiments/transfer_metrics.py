"""Companion CSVs of a reproduction for another key of the same runs (PLGU's lowest / top 5 %).

A reproduction's CSV holds one number per run (its ``metric``, e.g. PLGU's mean over clients
``global_accuracy_mean``).  Every run's ``summary.json`` and ``history.csv`` also hold the
lowest-5 % and top-5 % client accuracies (``*_accuracy_low5`` / ``*_accuracy_top5``), which
PLGU's Tables 1-2 print beside the average.  Running the cells again for them would double
the cost, so :func:`derive` reads them from the run directories named by each row's
``command`` (its ``--out``) and writes ``NAME_low5.csv`` / ``NAME_top5.csv``: the same rows
(same ``command``, which re-runs the row and rewrites the ``summary.json`` holding both
numbers) with ``metric`` → ``<model>_accuracy_<suffix>`` and the value of that key (last
round; best over the evaluated rounds from ``history.csv``).  A row whose run directory is
absent, or holding another run (a later command of the same cell name at another T), keeps
its earlier companion row if any, else has none; a failed row has none (never a number that
was not measured).

``python -m verification.experiments.transfer_metrics NAME [--results DIR]`` writes the
companion CSVs and their markdown (the reproduction's report with that metric).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from verification.experiments.reproduction_report import markdown
from verification.experiments.reproduction_run import FIELDS, read_rows, write_rows

SUFFIXES = ("low5", "top5")
_WORDS = {"low5": "lowest 5 % of clients", "top5": "top 5 % of clients"}
RESULTS = Path(__file__).resolve().parents[2] / "paper_figures" / "results"


def companion_metric(metric: str, suffix: str) -> str:
    """``global_accuracy_mean`` → ``global_accuracy_low5`` (any ``*_accuracy*`` key)."""
    if "_accuracy" not in metric:
        raise ValueError(f"metric {metric!r} is not an accuracy key")
    return metric.split("_accuracy")[0] + f"_accuracy_{suffix}"


def _run_dir(command: str) -> Path | None:
    argv = shlex.split(command)
    return Path(argv[argv.index("--out") + 1]) if "--out" in argv[:-1] else None


def _derived_row(row: dict, suffix: str) -> dict | None:
    """The companion of ``row``, or ``None`` when its run directory cannot be read."""
    metric = companion_metric(row["metric"], suffix)
    out = dict(row, metric=metric)
    if row.get("status", "ok") not in ("ok", ""):
        return None                              # a failed cell has no number to derive
    run = _run_dir(row["command"])
    try:
        summary = json.loads((run / "summary.json").read_text())
        with (run / "history.csv").open(newline="") as fh:
            history = list(csv.DictReader(fh))
    except (OSError, ValueError, TypeError):
        return None
    if summary.get("round") != int(row["rounds"]) or metric not in summary:
        return None           # the directory now holds another run of the cell (other T)
    best, best_t = -math.inf, ""
    for h in history:
        v = float(h[metric])
        if v > best:
            best, best_t = v, int(h["round"])
    return dict(out, value=repr(float(summary[metric])), best_value=repr(best),
                best_round=best_t)


def derive(csv_path, suffix: str, out_path) -> tuple[int, int]:
    """Write ``out_path`` (the companion of ``csv_path`` for ``suffix``); returns (rows
    derived from run directories, earlier companion rows kept)."""
    if suffix not in SUFFIXES:
        raise ValueError(f"suffix must be one of {SUFFIXES}, got {suffix!r}")
    earlier = {r["command"]: r for r in read_rows(out_path)}
    rows, fresh, kept = [], 0, 0
    for r in read_rows(csv_path):
        d = _derived_row(r, suffix)
        if d is not None:
            fresh += 1
        elif r["command"] in earlier:
            d, kept = earlier[r["command"]], kept + 1
        if d is not None:
            rows.append(d)
    write_rows(out_path, [{k: d.get(k, "") for k in FIELDS} for d in rows])
    return fresh, kept


def write_companions(name: str, results=RESULTS, log=print) -> list[Path]:
    """The companion CSVs and markdown of reproduction ``name`` in ``results``."""
    from verification.experiments.reproductions import get_reproduction

    rep = get_reproduction(name)
    results = Path(results)
    src = results / f"{name}.csv"
    if not src.is_file():
        raise FileNotFoundError(f"{src} absent: run pflt reproduce {name} first")
    written = []
    for suffix in SUFFIXES:
        path = results / f"{name}_{suffix}.csv"
        fresh, kept = derive(src, suffix, path)
        sub = replace(rep, name=f"{name}_{suffix}", metric=f"accuracy_{suffix}",
                      table=f"{rep.table}, {_WORDS[suffix]}")
        md = path.with_suffix(".md")
        md.write_text(markdown(sub, read_rows(path), claims=rep.claims,
                               command=f"python -m verification.experiments.transfer_metrics "
                                       f"{name}"))
        log(f"{path}: {fresh} rows from run directories, {kept} kept; {md}")
        written += [path, md]
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.experiments.transfer_metrics",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="a reproduction whose CSV is in --results")
    ap.add_argument("--results", default=str(RESULTS), help="directory of the CSVs")
    args = ap.parse_args(argv)
    try:
        write_companions(args.name, args.results)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
