"""``pflt figures``: regenerate the paper figures of :mod:`paper_figures`.

Examples::

    pflt figures                         # every figure module, full size
    pflt figures --quick --out /tmp/figs # tiny sizes (seconds), e.g. to test the scripts
    pflt figures --only 'pfedme_*'       # a selection (glob on module names)

Every figure module writes a PNG and the CSV of its plotted data into ``--out`` (default
``figures_out``). A module that raises is reported as failed with its error and the exit
code is 1; the other modules still run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pflt.cli import UserError
from pflt.out_lock import out_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "figures", help="regenerate the paper figures (PNG + CSV of the plotted data)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", metavar="NAME", action="append", default=None,
                   help="run only figure modules whose name matches this glob; repeat or "
                   "separate by commas for several")
    p.add_argument("--out", metavar="DIR", type=out_path, default=Path("figures_out"),
                   help="output directory (default: figures_out)")
    p.add_argument("--quick", action="store_true",
                   help="tiny problem sizes (seconds per figure), for smoke tests")
    p.add_argument("--seed", type=int, default=0, help="seed passed to every figure (default 0)")
    p.add_argument("--verify-results", metavar="PATH", type=Path, default=None,
                   help="pflt verify output (results.json or its directory) drawn by the "
                   "figures that summarise verify results (default: ./verify_out if present)")
    p.add_argument("--list", action="store_true", help="list the figure modules and exit")
    p.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paper_figures import driver
    from pflt.out_lock import check_out_dir
    from pfl_theory.threads import set_torch_threads

    set_torch_threads()

    if args.seed < 0:
        raise UserError(f"--seed must be >= 0, got {args.seed}")
    if args.list:
        found = driver.discover()
        for name, target in found.items():
            print(name if callable(target) else f"{name}  (import failed: {target})")
        print(f"{len(found)} figure module(s)")
        return 0
    check_out_dir(args.out)
    if args.verify_results is not None:
        import os

        from paper_figures._io import RESULTS_ENV_VAR

        if not args.verify_results.exists():
            raise FileNotFoundError(f"--verify-results {args.verify_results} does not exist")
        os.environ[RESULTS_ENV_VAR] = str(args.verify_results)
    results = driver.run_figures(out_dir=args.out, only=args.only, quick=args.quick,
                                 seed=args.seed, progress=not args.no_progress)
    print(driver.format_results(results))
    print(f"output directory: {args.out}")
    return 1 if any(not r.ok for r in results) else 0
