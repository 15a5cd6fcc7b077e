"""``pflt verify``: run the registered numerical checks and report.

Examples::

    pflt verify --quick                 # every check at its quick size (the main job)
    pflt verify --only 'pfedme.*' --seeds 3 --out verify_pfedme
    pflt verify --list                  # what is registered, nothing is run

The default size is **full** (each check's ``full`` parameters); ``--quick`` uses each
check's ``quick`` parameters (well under 10 s per check). Outputs go to ``--out``
(default ``verify_out``): ``report.md`` (summary, the checks that need attention, one line
per check that holds), ``details.md`` (the values of the checks that hold, the tolerances),
``results.json`` and ``figures/`` (what the checks draw, where they draw); the files the
previous ``pflt verify`` wrote there are replaced, anything else in ``--out`` is left alone
(nothing is written through a symbolic link; ``--out`` is locked while the checks run;
everything is written aside first, so an error or a full disk leaves the previous outputs
as they were); report.md groups the checks by verdict.

Cost and resume: before running, the command prints the estimated CPU time of the checks it
will run, from the per-check costs measured and shipped with the package
(verification/core/check_costs_table.py; a check never measured at that size is counted
apart).  Each check that finishes is kept at once in ``OUT/partial/progress.jsonl`` (with
its figures); a run stopped by Ctrl-C or a kill keeps them, and the same command run again
skips them and runs the rest; a complete run removes ``OUT/partial``. Exit code 0 when every
check ran (HOLDS, FAILS, ERRATUM, INCONCLUSIVE or VACUOUS — a FAILS is a finding about the
paper or our reading of it, not a crash; a VACUOUS bound holds but says nothing beyond its
trivial bound; NOT RUN: an optional dependency is missing, counted apart with its reason),
1 if any check ended in ERROR — or in a verdict listed by ``--fail-on`` (for CI:
``pflt verify --quick --fail-on FAILS,ERROR``), 2 for a usage error. With ``--list``, exit 1 if a check module fails to import.  The table
ends with the sensitivity line: the median factor on the theoretical side that would flip a
check's verdict, for the claims against measurements and, apart, for the identity checks
(code equals our reading of the papers); FAILS and ERRATUM are left out of it.  The table's
``sens.`` column is that factor for a check that holds; ``off by`` is how far a FAILS or
ERRATUM is from holding.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from pflt.cli import UserError
from pflt.out_lock import out_path
from pflt.commands._device import add_device_option, with_device

from verification.core.registry import KINDS, Verdict


def fail_on(text: str) -> frozenset[str]:
    """``FAILS,ERROR`` → the verdict values (case-insensitive; ``NOT_RUN`` = ``NOT RUN``);
    an unknown name is a usage error naming the known ones."""
    known = {v.value: v.value for v in Verdict}
    known.update({v.name: v.value for v in Verdict})
    out = set()
    for item in text.split(","):
        name = item.strip().upper()
        if not name:
            continue
        if name not in known:
            raise argparse.ArgumentTypeError(
                f"unknown verdict {item.strip()!r}; known: "
                f"{', '.join(v.name for v in Verdict)}")
        out.add(known[name])
    if not out:
        raise argparse.ArgumentTypeError("--fail-on names no verdict (e.g. FAILS,ERROR)")
    return frozenset(out)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify", help="run the numerical checks of the papers' claims and write a report",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="run each check at its quick size (minutes in total)")
    size.add_argument("--full", dest="size", action="store_const", const="full",
                      help="run each check at its full size (the default)")
    p.set_defaults(size="full")
    p.add_argument("--only", metavar="PATTERN", action="append", default=None,
                   help="run only checks whose id matches this glob (fnmatch, e.g. "
                   "'pfedme.*'); repeat or separate by commas for several patterns")
    p.add_argument("--kind", metavar="KIND", action="append", choices=KINDS, default=None,
                   help=f"run only checks of this kind (repeatable): {', '.join(KINDS)}")
    p.add_argument("--seeds", metavar="N", type=int, default=1,
                   help="run every check with seeds 0..N-1 and aggregate (worst verdict "
                   "wins); default 1")
    p.add_argument("--out", metavar="DIR", type=out_path, default=Path("verify_out"),
                   help="output directory for report.md, results.json and figures "
                   "(default: verify_out)")
    p.add_argument("--fail-on", metavar="VERDICTS", type=fail_on, action="append",
                   default=None,
                   help="exit 1 when any check ends in one of these verdicts (comma-separated, "
                   "e.g. FAILS,ERROR; repeatable). Default: exit 1 only on ERROR — a FAILS is "
                   "a finding, not a crash")
    p.add_argument("--list", action="store_true",
                   help="list the registered checks (after --only/--kind) and exit")
    p.add_argument("--estimate", action="store_true",
                   help="print the estimated CPU time of the checks chosen (from the "
                   "measured per-check costs shipped with the package) and exit; nothing runs")
    p.add_argument("--fresh", action="store_true",
                   help="start over: ignore (and remove) the checks an interrupted run kept "
                   "in OUT/partial (default: a re-run with the same size and seeds resumes, "
                   "running only the checks not finished)")
    p.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    p.add_argument("--wide", action="store_true",
                   help="print the table with one line per check, however long its values "
                   "(default: the table fits the terminal's width; a long value wraps onto "
                   "two lines and is cut there with '…' — report.md, details.md and "
                   "results.json hold it whole)")
    add_device_option(p)
    p.set_defaults(func=with_device(run))


def list_checks(only: list[str] | None, kinds: list[str] | None) -> int:
    """``--list``: with ``--only`` from the modules declaring a match, without it from the
    catalogue (:func:`pflt.catalog.checks`: no check module imported when it is cached)."""
    from types import SimpleNamespace

    from verification.core import runner

    if only:
        checks, import_errors = runner.load_checks(only=only)
    else:
        from pflt.catalog import checks as catalogue

        found = catalogue()
        checks = {e["id"]: SimpleNamespace(**e) for e in found if e["kind"] != "import"}
        import_errors = {e["id"][len("import."):]: e["reference"].split(": ", 1)[-1]
                         for e in found if e["kind"] == "import"}
    chosen = runner.select(checks, only=only, kinds=kinds)
    width = max([len(c.id) for c in chosen] + [2])
    print(f"{'id'.ljust(width)}  {'kind':<10}  R  paper — reference")
    for c in chosen:
        flag = "R" if c.reconstructed else " "
        print(f"{c.id.ljust(width)}  {c.kind:<10}  {flag}  {c.paper} — {c.reference}")
    print(f"{len(chosen)} check(s); R = tests a RECONSTRUCTED formula")
    for module, error in import_errors.items():
        print(f"import.{module}: module failed to import: {error}")
    return 1 if import_errors else 0


def print_estimate(args: argparse.Namespace) -> int:
    """``--estimate``: the cost line of the chosen checks and how it was measured."""
    from verification.core import runner
    from verification.core.check_costs import estimate, load

    checks, _ = runner.load_checks(only=args.only)
    chosen = runner.select(checks, only=args.only, kinds=args.kind)
    table = load()
    print(estimate([c.id for c in chosen], args.size, args.seeds, table=table))
    print(f"measured: {table['conditions'] or 'no costs shipped'}")
    return 0


def run(args: argparse.Namespace) -> int:
    from pfl_theory.threads import set_torch_threads_when_imported
    from pflt.out_lock import check_out_dir, out_lock
    from pflt.staged_out import staged
    from verification.core import runner
    from verification.core.report import CONSOLE_CELL, format_table

    set_torch_threads_when_imported()   # only a check that needs torch imports it

    if args.seeds < 1:
        raise UserError(f"--seeds must be >= 1, got {args.seeds}")
    if args.only is not None and not any(p.strip() for item in args.only
                                         for p in item.split(",")):
        raise UserError(f"--only {','.join(args.only)!r} names no pattern; give a glob "
                        "such as 'pfedme.*' (or leave --only out to run every check)")
    if args.list:
        return list_checks(args.only, args.kind)
    if args.estimate:
        return print_estimate(args)
    if args.kind and set(args.kind) == {"worst_case"}:
        from verification.worst_case.pep import PEPUnavailable, require_pepit
        try:
            require_pepit()
        except PEPUnavailable as exc:
            raise UserError(str(exc)) from None
    out = check_out_dir(args.out)
    from verification.core.progress import LOG, PARTIAL

    with out_lock(out):
        try:
            with staged(out, "verify") as stage:
                # the checks write into a fresh staging directory; its files replace the
                # previous run's in OUT only once everything is written (pflt.staged_out);
                # each finished check is kept meanwhile in OUT/partial (resume)
                suite = runner.run_and_report(only=args.only, kinds=args.kind,
                                              size=args.size, seeds=args.seeds,
                                              out_dir=stage, progress=not args.no_progress,
                                              echo=False, keep=out, fresh=args.fresh)
        except KeyboardInterrupt:
            log = out / PARTIAL / LOG
            kept = len(log.read_text(encoding="utf-8").splitlines()) if log.is_file() else 0
            import sys

            print(f"pflt verify: {kept} finished check(s) kept in {log}; the same command "
                  f"resumes from there (--fresh starts over)", file=sys.stderr)
            raise
        shutil.rmtree(out / PARTIAL, ignore_errors=True)   # complete: the record is done
    print(format_table(suite, width=None if args.wide else CONSOLE_CELL,
                       terminal=shutil.get_terminal_size((120, 24)).columns))
    print(f"wrote {out / 'report.md'}, {out / 'details.md'} and {out / 'results.json'}")
    listed = frozenset().union(*args.fail_on) if args.fail_on else frozenset()
    hit = sorted({run.verdict.value for run in suite.runs} & listed)
    if hit:
        print(f"exit 1: --fail-on {','.join(sorted(listed))} and the run has "
              f"{', '.join(hit)}")
        return 1
    return suite.exit_code
