"""``pflt reproduce NAME``: run a paper's real-data table and write its CSV and markdown.

``pflt reproduce --list`` names the reproductions (the registry:
:mod:`verification.experiments.reproductions`).  ``pflt reproduce NAME`` prints the cells'
estimated cost first (seconds per round measured on the project's shared 2-core machine),
then runs every cell not yet in ``OUT/NAME.csv`` — one ``pflt run`` per (method, column,
seed), ``--jobs J`` processes at a time, each in ``RUNS/NAME/CELL/`` — appending each
finished cell's row at once, and rewrites ``OUT/NAME.md`` (ours beside the paper's numbers).
Re-running the command skips the cells already in the CSV (a changed ``--rounds`` or
``--data-dir`` is a different command, hence a new cell).  ``--dry-run`` prints the cost and
the commands only.  docs/reproduction.md lists the tables and their costs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

from pflt.cli import UserError

DEFAULT_OUT = Path("paper_figures") / "results"
DEFAULT_RUNS = Path("runs") / "reproduce"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce", help="run a paper's real-data table (resumable) and write its CSV/markdown",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", metavar="NAME", help="a reproduction (see --list)")
    p.add_argument("--list", action="store_true", help="list the reproductions and exit")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="directory of the dataset's files (default: the data home, see "
                   "pflt data list)")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="training seeds (default: the entry's, 0 1 2)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds T of every cell (default: the paper's)")
    p.add_argument("--columns", nargs="+", default=None, metavar="COLUMN",
                   help="only these columns of the table (default: all)")
    p.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                   help="only these rows, as the paper prints them (default: all)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="replace a pflt run option of every cell, e.g. clients=4 for a smoke "
                   "test (it is part of each cell's command, hence of the CSV; repeatable)")
    p.add_argument("--jobs", type=int, default=1,
                   help="cells run at once, each its own process (default 1: in this process)")
    p.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                   help=f"where NAME.csv and NAME.md go (default {DEFAULT_OUT})")
    p.add_argument("--runs-dir", default=str(DEFAULT_RUNS), metavar="DIR",
                   help=f"run directories (default {DEFAULT_RUNS})")
    p.add_argument("--dry-run", action="store_true",
                   help="print the cost and the commands, run nothing")
    p.add_argument("--report", action="store_true",
                   help="only rewrite NAME.md from the rows already in NAME.csv")
    p.set_defaults(func=_main)


def _in_process_launch(argv: list[str], log_path: Path) -> int:
    from pflt.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            rc = main(["run", *argv])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    log_path.write_text(buf.getvalue())
    return int(rc or 0)


def _main(args) -> int:
    from verification.experiments import reproduction as R
    from verification.experiments.reproduction_report import markdown
    from verification.experiments.reproduction_run import read_rows, run_cells, subprocess_launch
    from verification.experiments.reproductions import REPRODUCTIONS, get_reproduction

    if args.list or not args.name:
        for rep in REPRODUCTIONS.values():
            cols = ", ".join(c.key for c in rep.columns)
            print(f"{rep.name:28s} {rep.paper} {rep.table}: {cols}")
        return 0
    rep = get_reproduction(args.name)
    if args.jobs < 1 or (args.rounds is not None and args.rounds < 1):
        raise UserError("--jobs and --rounds must be >= 1")
    known = {c.key for c in rep.columns}
    if args.columns and not set(args.columns) <= known:
        raise UserError(f"unknown column(s) {sorted(set(args.columns) - known)}; "
                        f"{rep.name} has {sorted(known)}")
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise UserError(f"--data-dir {args.data_dir}: not a directory")
    known_rows = {r.label for r in rep.rows}
    if args.methods and not set(args.methods) <= known_rows:
        raise UserError(f"unknown method(s) {sorted(set(args.methods) - known_rows)}; "
                        f"{rep.name} has {sorted(known_rows)}")
    overrides = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--option {item!r}: expected KEY=VALUE")
        overrides[key.strip().lstrip("-").replace("-", "_")] = (
            value.split() if len(value.split()) > 1 else value)
    cells = R.cells(rep, seeds=args.seeds, rounds=args.rounds, columns=args.columns,
                    methods=args.methods, overrides=overrides)
    out = Path(args.out)
    csv_path, md_path = out / f"{rep.name}.csv", out / f"{rep.name}.md"
    done = {r["command"] for r in read_rows(csv_path)}
    pending = [c for c in cells
               if c.command(args.data_dir, str(Path(args.runs_dir) / rep.name / c.run_name))
               not in done]
    est = R.cost_seconds(rep, pending)
    print(f"{rep.name}: {len(cells)} cells ({len({c.row.label for c in cells})} methods × "
          f"{len({c.column.key for c in cells})} columns × {len({c.seed for c in cells})} seeds), "
          f"{len(cells) - len(pending)} already in {csv_path}; estimated cost of the "
          f"{len(pending)} to run: {est / 60:.1f} CPU-minutes, ~{est / 60 / args.jobs:.1f} "
          f"minutes with --jobs {args.jobs} (measured per-round times on a shared 2-core machine)",
          flush=True)
    cmd = f"pflt reproduce {rep.name}" + (f" --data-dir {args.data_dir}" if args.data_dir else "")
    if args.report:
        md_path.write_text(markdown(rep, read_rows(csv_path), claims=rep.claims, command=cmd))
        print(f"wrote {md_path}")
        return 0
    if args.dry_run:
        for c in pending:
            print(c.command(args.data_dir, str(Path(args.runs_dir) / rep.name / c.run_name)))
        return 0
    _check_data(rep, cells, args.data_dir)
    launch = _in_process_launch if args.jobs == 1 else subprocess_launch
    run_cells(cells, csv_path, args.runs_dir, data_dir=args.data_dir, jobs=args.jobs,
              launch=launch, log=lambda s: print(s, flush=True))
    md_path.write_text(markdown(rep, read_rows(csv_path), claims=rep.claims, command=cmd))
    print(f"wrote {csv_path} and {md_path}")
    return 0


def _check_data(rep, cells, data_dir) -> None:
    """One line naming the missing dataset before any cell runs (the loads check the files)."""
    from synthetic.real_data.home import resolve_dataset

    if data_dir is not None:
        return
    for name in sorted({c.column.data for c in cells}):
        resolve_dataset(name)       # FileNotFoundError (one line, exit 2) when absent
