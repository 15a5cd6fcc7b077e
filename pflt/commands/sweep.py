"""``pflt sweep config.toml``: run a grid of ``pflt run`` configurations.

The TOML file holds a base run configuration (any ``pflt run`` option, hyper-parameters in
a ``[hyperparameters]`` table or at top level) and a ``[sweep]`` table whose values are
lists, e.g. ``lam = [10, 15, 20]``, ``seed = [0, 1, 2]``.  Every point of the Cartesian
product runs in ``OUT/point-<i>/``; each finished point is appended to ``OUT/sweep.jsonl``
(its parameters, final metrics and the SHA-256 of the cell's fully resolved options), so an
interrupted sweep resumes where it stopped: a point is skipped only if its resolved options
are unchanged (editing the base options re-runs the affected points); a torn last line (a
kill mid-write) is dropped with a warning.  Every cell is validated before the first runs;
``out``/``resume``/``config`` cannot be swept (cells always write inside ``--out``).  ``OUT/summary.csv`` collects all finished points;
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
import sys
from pathlib import Path

from pfl_theory.safe_files import append_text, atomic_open, atomic_write_text, safe_subdir
from pflt.cli import UserError
from pflt.commands._sweep_input import (check_algorithm_tables, check_size, check_values,
                                        to_toml)
from pflt.commands.run_options import read_toml
from pflt.out_lock import out_dir


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of configurations (resumable, summary CSV)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="TOML file: base options plus a [sweep] table of lists")
    p.add_argument("--out", type=out_dir, default="runs/sweep", help="output directory (default runs/sweep)")
    p.add_argument("--no-progress", action="store_true", help="no per-run progress bars")
    p.add_argument("--device", default=None, metavar="DEVICE",
                   help="cpu or cuda[:K] for every cell (default: the config's, else as "
                        "pflt run: cuda when available)")
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


#: keys a sweep sets itself: a cell always writes to OUT/point-<i>/
RESERVED = {"out", "resume", "config"}


def read_log(log: Path) -> list[dict]:
    """Records of ``sweep.jsonl``.  A torn last line (a sweep killed while appending) is
    dropped with a warning and the file rewritten without it; any other malformed line is a
    :class:`UserError` (the file is not a sweep log)."""
    if not log.exists():
        return []
    if not log.is_file():
        raise UserError(f"{log} is not a file")
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            if n == len(lines):
                print(f"warning: {log}: dropping the torn last line {n} (an interrupted "
                      "write); its point runs again", file=sys.stderr)
                atomic_write_text(log, "".join(x + "\n" for x in lines[:-1]))
                break
            raise UserError(f"{log} line {n} is not a sweep record (not JSON); move the "
                            "file away to start the sweep afresh") from None
        problem = record_problem(rec)
        if problem:
            raise UserError(f"{log} line {n}: {problem}; move the file away to start the "
                            "sweep afresh")
        rec["final"] = {k: v for k, v in rec.get("final", {}).items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)}
        records.append(rec)
    return records


def record_problem(rec) -> str | None:
    """What is wrong with one ``sweep.jsonl`` record (``None``: a valid record)."""
    from pflt.run_dirs import json_type

    if not isinstance(rec, dict):
        return f"{json_type(rec)} where a record object is expected"
    expected = {"point": dict, "config_hash": str, "final": dict, "diverged": bool}
    for key, kind in expected.items():
        value = rec.get(key, {} if key == "final" else False if key == "diverged" else None)
        if not isinstance(value, kind):
            return f"key {key!r} is {json.dumps(value, default=str)[:40]}, not {kind.__name__}"
    return None


def _argv_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def cell_hash(options: dict) -> str:
    """SHA-256 of a cell's full resolved options (without where it writes and how it
    shows progress): a resumed sweep reuses a finished cell only if this is unchanged."""
    import hashlib

    from pflt.commands import run_options as opts

    kept = {k: v for k, v in opts.saved(options).items()
            if k not in ("out", "no_progress", "threads", "model_chosen")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def cells(points: list[dict], base: Path, out: Path, no_progress: bool,
          source: Path | None = None, device: str | None = None) -> list[dict]:
    """Every point's resolved options, validated before anything runs.  An error names the
    user's sweep file ``source`` (never ``base``, the ``OUT/base.toml`` written from it)
    and the point."""
    from pflt.cli import build_parser
    from pflt.commands import run_options as opts

    parser, actions = build_parser(), opts._actions()
    found = []
    for i, point in enumerate(points):
        try:
            found.append(_cell(i, point, parser, actions, base, out, no_progress, device))
        except (UserError, ValueError) as exc:
            if source is None:
                raise
            text = str(exc).replace(str(base), f"{source} (its base options)")
            if str(source) not in text:
                text = f"{source}: point {i + 1}/{len(points)} {point}: {text}"
            raise type(exc)(text) from None
    return found


def _cell(i: int, point: dict, parser, actions: dict, base: Path, out: Path,
          no_progress: bool, device: str | None = None) -> dict:
    from pflt.commands import run_options as opts

    bad = sorted(k for k in point if k.replace("-", "_") in RESERVED)
    if bad:
        raise UserError(f"[sweep] cannot set {', '.join(bad)}: every cell writes to "
                        f"{out}/point-<i>/")
    argv = ["run", "--config", str(base), "--out", str(out / f"point-{i:03d}")]
    for k, v in point.items():
        dest = k.replace("-", "_")
        dest = dest if dest in actions else f"hp_{dest}"
        if dest not in actions:
            raise UserError(f"[sweep] unknown option {k!r}")
        opts.coerce(dest, v, actions[dest], "[sweep]")
        # --key=value: a value starting with "-" (-1e-5) is not taken for an option
        argv.append(f"--{k.replace('_', '-')}={_argv_value(v)}")
    if no_progress:
        argv.append("--no-progress")
    if device is not None:          # --device of the sweep: every cell, over its config
        argv.append(f"--device={device}")
    ns = parser.parse_args(argv)
    ns.argv = argv
    options = opts.resolve(ns)
    return {"index": i, "point": point, "options": options, "hash": cell_hash(options)}


def run(args) -> int:
    from pflt.commands import run as run_cmd
    from pflt.out_lock import out_lock

    path = Path(args.config)
    raw = read_toml(path)
    check_values(raw, path)
    bad = sorted(k for k in raw if k.replace("-", "_") in RESERVED)
    if bad:
        raise UserError(f"{path}: {', '.join(bad)} cannot be set in a sweep config (every "
                        f"cell writes to --out/point-<i>/)")
    per_algorithm = raw.pop("algorithms", {})
    sweep = raw.pop("sweep", {})
    base_algorithm = str(raw.get("algorithm", "pfedme"))
    swept = sweep.get("algorithm", [base_algorithm])
    check_algorithm_tables(per_algorithm, {str(a) for a in (swept if isinstance(swept, list)
                                                            else [swept])}, path)
    size = check_size(sweep, per_algorithm, base_algorithm, path)
    points = grid(sweep, per_algorithm, base_algorithm)
    out = Path(args.out)
    check_base(raw, path)
    with out_lock(out):
        base = out / "base.toml"
        atomic_write_text(base, to_toml(raw))
        if size > 200:
            print(f"validating the {size} points of {path} …", file=sys.stderr)
        todo = cells(points, base, out, args.no_progress, source=path,
                     device=getattr(args, "device", None))
        log = out / "sweep.jsonl"
        current = {c["hash"] for c in todo}
        old = read_log(log)
        done = [r for r in old if r.get("config_hash") in current]
        if len(done) < len(old):
            print(f"{len(old) - len(done)} earlier record(s) in {log} do not match the "
                  "current configuration (base options changed?): their points run again",
                  file=sys.stderr)
        finished = {r["config_hash"] for r in done}
        for cell in todo:
            i, point = cell["index"], cell["point"]
            if cell["hash"] in finished:
                print(f"point {i + 1}/{len(points)} {point}: done, skipped")
                continue
            print(f"point {i + 1}/{len(points)} {point}")
            safe_subdir(out, f"point-{i:03d}")   # a real directory inside OUT, not a link
            # the point's directory is the sweep's: a point run again replaces its files
            summary = run_cmd.execute({**cell["options"], "overwrite": True},
                                      progress=not args.no_progress)
            # "out" relative to the sweep directory: a copied sweep reads its own points
            record = {"point": point, "index": i, "out": f"point-{i:03d}",
                      "config_hash": cell["hash"], "diverged": summary is None,
                      "final": summary or {}}
            append_text(log, json.dumps(record) + "\n")
            done.append(record)
            finished.add(cell["hash"])
        _write_summary(out / "summary.csv", done)
        table = _write_by_config(out / "summary_by_config.csv", done)
    print(table)
    print(f"{len(done)} points: {out / 'summary.csv'}, {out / 'summary_by_config.csv'}")
    return 0


def check_base(raw: dict, path: Path) -> None:
    """Every base option converted and checked as ``pflt run --config`` would, but against
    the user's file (not the ``OUT/base.toml`` written from it)."""
    from pflt.commands import run_options as opts

    actions = opts._actions()
    for key, value in raw.items():
        table = value if isinstance(value, dict) else {key: value}
        for k, v in table.items():
            dest = k.replace("-", "_")
            dest = dest if dest in actions and key != "hyperparameters" else f"hp_{dest}"
            if dest not in actions or dest in ("hp_config", "hp_resume"):
                where = f"[{key}] " if isinstance(value, dict) else ""
                raise UserError(f"{path}: unknown option {where}{k!r}")
            opts.coerce(dest, v, actions[dest], str(path))


def _write_summary(path: Path, records: list[dict]) -> None:
    point_keys = sorted({k for r in records for k in r["point"]})
    metric_keys = sorted({k for r in records for k in r["final"]})
    with atomic_open(path, "w", newline="") as fh:
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
    with atomic_open(path, "w", newline="") as fh:
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
