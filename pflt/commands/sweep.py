"""``pflt sweep config.toml``: run a grid of ``pflt run`` configurations.

The TOML file holds a base run configuration (any ``pflt run`` option, hyper-parameters in
a ``[hyperparameters]`` table or at top level) and a ``[sweep]`` table whose values are
lists, e.g. ``lam = [10, 15, 20]``, ``seed = [0, 1, 2]``.  Every point of the Cartesian
product runs in ``OUT/point-<i>/``; each finished point is appended to ``OUT/sweep.jsonl``
(its parameters and final metrics), so an interrupted sweep resumes where it stopped
(finished points are skipped).  ``OUT/summary.csv`` collects all finished points;
``OUT/summary_by_config.csv`` (and the printed table) gives every final metric as mean ± sd
over the seeds of each configuration (the points that differ only in ``seed``).

Sweeping over algorithms: ``algorithm = ["fedavg", "pfedme"]`` in ``[sweep]``, and one
table per algorithm for its own hyper-parameters, ``[algorithms.pfedme]``: a scalar there is
fixed for that algorithm, a list is swept for that algorithm only, e.g.::

    rounds = 20
    [sweep]
    algorithm = ["fedavg", "pfedme"]
    seed = [0, 1, 2]
    [algorithms.fedavg]
    lr = 0.02
    [algorithms.pfedme]
    lam = [15, 20]
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


def _product(table: dict, where: str) -> list[dict]:
    for key, values in table.items():
        if not isinstance(values, list) or not values:
            raise UserError(f"{where} {key} must be a non-empty list, got {values!r}")
    keys = list(table)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(table[k] for k in keys))]


def grid(sweep: dict, per_algorithm: dict | None = None, base_algorithm: str = "pfedme"
         ) -> list[dict]:
    """All points of the Cartesian product of the ``[sweep]`` lists, in a fixed order; for
    each point, the ``[algorithms.<its algorithm>]`` table adds that algorithm's fixed
    hyper-parameters and multiplies the point by its lists."""
    if not sweep:
        raise UserError("the config has no [sweep] table of lists")
    per_algorithm = per_algorithm or {}
    for name, table in per_algorithm.items():
        if not isinstance(table, dict):
            raise UserError(f"[algorithms] {name} must be a table of hyper-parameters")
    points = []
    for point in _product(sweep, "[sweep]"):
        table = per_algorithm.get(point.get("algorithm", base_algorithm), {})
        fixed = {k: v for k, v in table.items() if not isinstance(v, list)}
        swept = {k: v for k, v in table.items() if isinstance(v, list)}
        clash = sorted(set(table) & set(point))
        if clash:
            raise UserError(f"{', '.join(clash)} both in [sweep] and in [algorithms."
                            f"{point.get('algorithm', base_algorithm)}]")
        for extra in (_product(swept, f"[algorithms.{point.get('algorithm', base_algorithm)}]")
                      if swept else [{}]):
            points.append({**point, **fixed, **extra})
    return points


def run(args) -> int:
    from pflt.commands.run_options import tomllib

    from pflt.cli import build_parser
    from pflt.commands import run as run_cmd
    from pflt.commands import run_options as opts

    path = Path(args.config)
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist")
    raw = tomllib.loads(path.read_text())
    per_algorithm = raw.pop("algorithms", {})
    if not isinstance(per_algorithm, dict):
        raise UserError("[algorithms] must hold one table per algorithm, e.g. [algorithms.pfedme]")
    points = grid(raw.pop("sweep", {}), per_algorithm, str(raw.get("algorithm", "pfedme")))
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
    table = _write_by_config(out / "summary_by_config.csv", done)
    print(table)
    print(f"{len(done)} points: {out / 'summary.csv'}, {out / 'summary_by_config.csv'}")
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


def _by_config(records: list[dict]) -> tuple[list[str], list[tuple[dict, list[dict]]]]:
    """Metric names and the records grouped by their point without ``seed``."""
    groups: dict[str, tuple[dict, list[dict]]] = {}
    for r in records:
        config = {k: v for k, v in r["point"].items() if k != "seed"}
        groups.setdefault(json.dumps(config, sort_keys=True, default=str), (config, []))[1].append(r)
    metrics = sorted({k for r in records for k, v in r["final"].items()
                      if k != "round" and isinstance(v, (int, float))})
    return metrics, list(groups.values())


def _write_by_config(path: Path, records: list[dict]) -> str:
    """``summary_by_config.csv``: per configuration, the number of seeds, diverged runs and
    ``<metric>_mean`` / ``<metric>_sd`` over seeds; returns a printable table of the
    ``*_accuracy`` metrics as mean ± sd."""
    from pflt.aggregate import format_mean_sd, mean_sd

    metrics, groups = _by_config(records)
    keys = sorted({k for config, _ in groups for k in config})
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(keys + ["seeds", "diverged"]
                        + [f"{m}_{s}" for m in metrics for s in ("mean", "sd")])
        for config, recs in groups:
            stats = [mean_sd(r["final"].get(m) for r in recs) for m in metrics]
            writer.writerow([config.get(k) for k in keys] + [len(recs),
                            sum(r["diverged"] for r in recs)]
                            + [x for mean, sd, _ in stats for x in (mean, sd)])
    shown = [m for m in metrics if m.endswith("_accuracy")] or metrics
    lines = ["configuration | seeds | " + " | ".join(shown)]
    for config, recs in groups:
        label = " ".join(f"{k}={v}" for k, v in config.items()) or "(base)"
        cells = [format_mean_sd(*mean_sd(r["final"].get(m) for r in recs)) for m in shown]
        lines.append(f"{label} | {len(recs)} | " + " | ".join(cells))
    return "\n".join(lines)


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
