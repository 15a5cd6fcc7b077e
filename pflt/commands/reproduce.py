"""``pflt reproduce NAME``: run a paper's real-data table and write its CSV and markdown.

``pflt reproduce --list`` names the reproductions (the registry:
:mod:`verification.experiments.reproductions`).  ``pflt reproduce NAME`` checks every
option and the data first (nothing runs when one is wrong), prints the cells' estimated cost
(seconds per round measured on the project's shared 2-core machine), then runs every cell
not yet finished in ``OUT/NAME.csv`` — one ``pflt run`` per (method, column, seed),
``--jobs J`` processes at a time, each in ``RUNS/NAME/CELL/`` — writing each finished cell's
row at once, and rewrites ``OUT/NAME.md`` (ours beside the paper's numbers) from the CSV.
``OUT`` is ``runs/reproduce/NAME/`` unless ``--out DIR``; the shipped tables in
paper_figures/results/ change only with ``--update-shipped``.  Re-running the command runs
the cells that failed or are missing and skips the finished ones (``--force``: all again);
a changed ``--rounds``, ``--option`` or ``--data-dir`` is a different command, hence a new
cell.  A failed cell makes the command exit 1 naming the cell and its reason.
``--dry-run`` prints the cost and the commands only.  docs/reproduction.md lists the tables
and their costs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

from pflt.cli import UserError

RUNS = Path("runs") / "reproduce"
SHIPPED = Path(__file__).resolve().parents[2] / "paper_figures" / "results"
MAX_JOBS = 256


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
                   help="training seeds, distinct (default: the entry's, 0 1 2)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds T of every cell (default: the paper's)")
    p.add_argument("--columns", nargs="+", default=None, metavar="COLUMN",
                   help="only these columns of the table (default: all)")
    p.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                   help="only these rows: as the paper prints them ('pFedMe (PM)'), or the "
                   "algorithm's name (pfedme, cgpfl-heur) where it names one row (default: all)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="replace a pflt run option of every cell, e.g. clients=4 and "
                   "clients_per_round=4 (two --option) for a smoke "
                   "test (it is part of each cell's command, hence of the CSV; repeatable); "
                   "not what the cell sets itself (seed, rounds, out …) nor what tells the "
                   "rows apart (algorithm, a K or λ their labels name)")
    p.add_argument("--jobs", type=int, default=1,
                   help="cells run at once, each its own process (default 1: in this process)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help=f"where NAME.csv and NAME.md go (default {RUNS}/NAME)")
    where.add_argument("--update-shipped", action="store_true",
                       help="write the shipped table, paper_figures/results/NAME.csv and .md "
                       "(and the real-data status page)")
    p.add_argument("--runs-dir", default=str(RUNS), metavar="DIR",
                   help=f"run directories (default {RUNS})")
    p.add_argument("--force", action="store_true",
                   help="run the finished cells again too (their rows are replaced)")
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
    if rc == 130:                  # Ctrl-C inside the cell: stop the table, not only the cell
        raise KeyboardInterrupt
    return int(rc or 0)


def _request(args):
    """The reproduction and its cells, every option checked (one line, exit 2)."""
    from verification.experiments import reproduction as R
    from verification.experiments.reproductions import get_reproduction

    rep = get_reproduction(args.name)
    if not 1 <= args.jobs <= MAX_JOBS:
        raise UserError(f"--jobs must lie in [1, {MAX_JOBS}], got {args.jobs}")
    if args.rounds is not None and args.rounds < 1:
        raise UserError(f"--rounds must be >= 1, got {args.rounds}")
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        dup = sorted({s for s in args.seeds if args.seeds.count(s) > 1})
        raise UserError(f"--seeds {' '.join(map(str, args.seeds))}: seed(s) "
                        f"{', '.join(map(str, dup))} given twice (one run would count as "
                        "several seeds)")
    known = {c.key for c in rep.columns}
    if args.columns and not set(args.columns) <= known:
        raise UserError(f"unknown column(s) {sorted(set(args.columns) - known)}; "
                        f"{rep.name} has {sorted(known)}")
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise UserError(f"--data-dir {args.data_dir}: not a directory")
    methods = R.resolve_methods(rep, args.methods) if args.methods else None
    overrides = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key:
            raise UserError(f"--option {item!r}: expected KEY=VALUE")
        overrides[key] = value.split() if len(value.split()) > 1 else value
    R.check_overrides(rep, overrides)
    cells = R.cells(rep, seeds=args.seeds, rounds=args.rounds, columns=args.columns,
                    methods=methods, overrides=overrides)
    if not cells:
        raise UserError(f"no cell of {rep.name} has these --columns and --methods (a row "
                        "can run on some columns only)")
    return rep, cells, overrides


def _main(args) -> int:
    from verification.experiments import reproduction as R
    from verification.experiments.reproduction_run import pending, read_rows
    from verification.experiments.reproductions import REPRODUCTIONS

    from pflt.commands._reproduce_check import check_cell_options

    if args.list or args.name is None:
        for rep in REPRODUCTIONS.values():
            cols = ", ".join(c.key for c in rep.columns)
            print(f"{rep.name:28s} {rep.paper} {rep.table}: {cols}")
        return 0
    rep, cells, overrides = _request(args)
    resolved = check_cell_options(cells, overrides, args.data_dir, args.runs_dir)
    out = SHIPPED if args.update_shipped else Path(args.out or Path(RUNS) / rep.name)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    csv_path, md_path = out / f"{rep.name}.csv", out / f"{rep.name}.md"
    rows = read_rows(csv_path)
    todo = pending(cells, csv_path, args.runs_dir, args.data_dir, force=args.force)
    failed_before = {r["command"]: r for r in rows if r.get("status", "ok") not in ("ok", "")}
    redo = [c for c, o in todo if c.command(args.data_dir, o) in failed_before]
    est = R.cost_seconds(rep, [c for c, _ in todo])
    print(f"{rep.name}: {len(cells)} cells ({len({c.row.label for c in cells})} methods × "
          f"{len({c.column.key for c in cells})} columns × {len({c.seed for c in cells})} seeds), "
          f"{len(cells) - len(todo)} already in {csv_path}"
          + (f", {len(redo)} failed before (they run again)" if redo else "")
          + f"; estimated cost of the {len(todo)} to run: {est / 60:.1f} CPU-minutes, "
          f"~{est / 60 / args.jobs:.1f} minutes with --jobs {args.jobs} (measured per-round "
          "times on a shared 2-core machine)", flush=True)
    cmd = f"pflt reproduce {rep.name}" + (f" --data-dir {args.data_dir}" if args.data_dir else "")
    if args.report:
        if not csv_path.is_file():
            raise UserError(f"--report: no {csv_path} to report (run the table first, or "
                            "give --out DIR holding it)")
        _write_md(rep, csv_path, md_path, cmd, args.update_shipped)
        return 0
    if args.dry_run:
        _dry_run(cells, todo, failed_before, csv_path, args)
        return 0
    return _run(rep, cells, todo, resolved, csv_path, md_path, cmd, args)


def _dry_run(cells, todo, failed_before, csv_path, args) -> None:
    from pathlib import Path as P

    def command(c, o=None):
        return c.command(args.data_dir, o or str(P(args.runs_dir) / c.reproduction / c.run_name))

    if not todo:
        print(f"nothing left to run: all {len(cells)} cells are finished in {csv_path}; "
              f"with --force these {len(cells)} would run again:")
        for c in cells:
            print(command(c))
        return
    for c, o in todo:
        print(command(c, o))
    again = [(c, failed_before[command(c, o)]) for c, o in todo if command(c, o) in failed_before]
    for c, r in again:
        print(f"# {c.run_name} failed before ({r['status']}: {r.get('reason') or 'no reason'}"
              "): it runs again")


def _run(rep, cells, todo, resolved, csv_path, md_path, cmd, args) -> int:
    from verification.experiments.reproduction_run import run_cells, subprocess_launch

    from pflt.commands._reproduce_check import check_data, check_setups
    from pflt.out_lock import out_lock

    if todo:                       # before anything is written: a refusal leaves no trace
        for line in check_data({c.column.data for c, _ in todo}, args.data_dir):
            print(line, flush=True)
        check_setups([c for c, _ in todo], resolved)
    with out_lock(Path(args.runs_dir) / rep.name):
        launch = _in_process_launch if args.jobs == 1 else subprocess_launch
        new = run_cells(cells, csv_path, args.runs_dir, data_dir=args.data_dir,
                        jobs=args.jobs, launch=launch, log=lambda s: print(s, flush=True),
                        force=args.force)
        _write_md(rep, csv_path, md_path, cmd, args.update_shipped)
    failed = [r for r in new if r["status"] != "ok"]
    if not failed:
        return 0
    import shlex
    import sys

    for r in failed:
        argv = shlex.split(r["command"])
        log = argv[argv.index("--out") + 1] + ".log" if "--out" in argv else "?"
        print(f"pflt reproduce: error: {r['method']} on {r['column']}, seed {r['seed']}: "
              f"{r['status']}: {r['reason']} (log: {log})", file=sys.stderr)
    print(f"pflt reproduce: error: {len(failed)} of {len(new)} cells failed; running the same "
          "command again runs them again", file=sys.stderr)
    return 1


def _write_md(rep, csv_path, md_path, cmd, shipped: bool) -> None:
    from pfl_theory.safe_files import atomic_write_text
    from verification.experiments.reproduction_report import markdown
    from verification.experiments.reproduction_run import read_rows

    md_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(md_path, markdown(rep, read_rows(csv_path), claims=rep.claims,
                                        command=cmd))
    written = [csv_path, md_path] if csv_path.is_file() else [md_path]
    if shipped:
        from paper_figures.real_data_status import OUT_NAME, render

        atomic_write_text(md_path.parent / OUT_NAME, render(md_path.parent))
        written.append(md_path.parent / OUT_NAME)
    note = "" if shipped else (f" (the shipped paper_figures/results/{md_path.name} is "
                               "unchanged: --update-shipped writes there)")
    print("wrote " + ", ".join(map(str, written)) + note)
