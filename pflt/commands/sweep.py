"""``pflt sweep config.toml``: run a grid of ``pflt run`` configurations.

The TOML file holds a base run configuration (any ``pflt run`` option, hyper-parameters in
a ``[hyperparameters]`` table or at top level) and a ``[sweep]`` table whose values are
lists, e.g. ``lam = [10, 15, 20]``, ``seed = [0, 1, 2]``.  Every point of the Cartesian
product runs in ``OUT/point-<i>/``; each finished point is appended to ``OUT/sweep.jsonl``
(its parameters and final metrics), so an interrupted sweep resumes where it stopped
(finished points are skipped).  ``OUT/summary.csv`` collects all finished points.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
from pathlib import Path

from pflt.cli import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of configurations (resumable, summary CSV)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="TOML file: base options plus a [sweep] table of lists")
    p.add_argument("--out", default="runs/sweep", help="output directory (default runs/sweep)")
    p.add_argument("--no-progress", action="store_true", help="no per-run progress bars")
    p.set_defaults(func=run)


def grid(sweep: dict) -> list[dict]:
    """All points of the Cartesian product of the ``[sweep]`` lists, in a fixed order."""
    if not sweep:
        raise UserError("the config has no [sweep] table of lists")
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise UserError(f"[sweep] {key} must be a non-empty list, got {values!r}")
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def run(args) -> int:
    from pflt.commands.run_options import tomllib

    from pflt.cli import build_parser
    from pflt.commands import run as run_cmd
    from pflt.commands import run_options as opts

    path = Path(args.config)
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist")
    raw = tomllib.loads(path.read_text())
    points = grid(raw.pop("sweep", {}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / "base.toml"
    base.write_text(_to_toml(raw))
    log = out / "sweep.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    finished = {json.dumps(d["point"], sort_keys=True) for d in done}
    parser = build_parser()
    for i, point in enumerate(points):
        key = json.dumps(point, sort_keys=True)
        if key in finished:
            print(f"point {i + 1}/{len(points)} {point}: done, skipped")
            continue
        argv = ["run", "--config", str(base), "--out", str(out / f"point-{i:03d}")]
        for k, v in point.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        if args.no_progress:
            argv.append("--no-progress")
        ns = parser.parse_args(argv)
        ns.argv = argv
        print(f"point {i + 1}/{len(points)} {point}")
        summary = run_cmd.execute(opts.resolve(ns), progress=not args.no_progress)
        record = {"point": point, "out": str(out / f"point-{i:03d}"),
                  "diverged": summary is None, "final": summary or {}}
        with open(log, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        done.append(record)
    _write_summary(out / "summary.csv", done)
    print(f"{len(done)} points: {out / 'summary.csv'}")
    return 0


def _write_summary(path: Path, records: list[dict]) -> None:
    point_keys = sorted({k for r in records for k in r["point"]})
    metric_keys = sorted({k for r in records for k in r["final"]})
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(point_keys + ["diverged"] + metric_keys)
        for r in records:
            writer.writerow([r["point"].get(k) for k in point_keys] + [r["diverged"]]
                            + [r["final"].get(k) for k in metric_keys])


def _to_toml(raw: dict) -> str:
    lines, tables = [], []
    for k, v in raw.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {json.dumps(v)}")
    for name, table in tables:
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"
