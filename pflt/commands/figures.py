"""``pflt figures``: regenerate the paper figures of :mod:`paper_figures`.

Examples::

    pflt figures                         # every figure module, full size
    pflt figures --quick --out /tmp/figs # tiny sizes (~2 CPU-minutes in all), e.g. to test
    pflt figures --only 'pfedme_*'       # a selection (glob on module names)

Every figure module writes a PNG and the CSV of its plotted data into ``--out`` (default
``figures_out``); as each module finishes, its CPU and wall time are printed (stderr), and
the total at the end — on a busy machine the wall time is a multiple of the CPU time, and
the line says so. A module that raises is reported as failed with its error and the exit
code is 1; the other modules still run.  The figures that summarise ``pflt verify`` results
(``verification_summary``, ``bound_tightness``) draw the results given by ``--from DIR``
(else ``./verify_out``, else ``./runs/verify`` — where ``pflt verify`` writes by default and
where the README's ``pflt verify --quick --out runs/verify`` does — the first that holds a
results.json) and the command prints which file that was and what it covers (checks,
kinds, size, time); they look nowhere else.
``--out`` is locked while the modules run; they write aside first, and their files replace
the previous ones only when all have run (a user's other files in ``--out`` stay; nothing is
written through a symbolic link).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from pathlib import Path

from pflt.cli import UserError
from pflt.out_lock import out_path
from pflt.commands._device import add_device_option, with_device


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
                   help="tiny problem sizes: about 2 CPU-minutes for all 12 modules "
                   "(measured 2026-12-08 on a shared 2-core machine: worst_case 34 s, "
                   "selection 22 s, bound_tightness 20 s, each other module under 10 s); "
                   "the wall time is that times the machine's load (22 minutes at load 23)")
    p.add_argument("--seed", type=int, default=0, help="seed passed to every figure (default 0)")
    p.add_argument("--from", "--verify-results", dest="verify_results", metavar="DIR",
                   type=Path, default=None,
                   help="the pflt verify output (its directory or results.json) that the "
                   "verify-summary figures draw (default: ./verify_out, else ./runs/verify, "
                   "the first that holds one); the command prints which results were drawn")
    p.add_argument("--list", action="store_true", help="list the figure modules and exit")
    p.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    add_device_option(p)
    p.set_defaults(func=with_device(run))


#: the figure modules that draw ``pflt verify`` results (``--from``)
DRAW_VERIFY_RESULTS = ("verification_summary", "bound_tightness")


def run(args: argparse.Namespace) -> int:
    from paper_figures import driver
    from pflt.out_lock import check_out_dir, out_lock
    from pflt.staged_out import staged
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
    out = check_out_dir(args.out)
    results = _verify_results(args.verify_results)
    with out_lock(out):
        with staged(out, "figures") as stage, _results_env(results):
            # the modules write into a fresh staging directory; its files replace the
            # previous ones in OUT only once every module ran (pflt.staged_out)
            found = driver.run_figures(out_dir=stage, only=args.only, quick=args.quick,
                                       seed=args.seed, progress=not args.no_progress)
            # a module that failed (a full disk, an error) keeps its previous files
            stage.keep_previous = any(not r.ok for r in found)
            found = [dataclasses.replace(r, files=tuple(
                out / p.relative_to(stage) if p.is_relative_to(stage) else p
                for p in r.files)) for r in found]
    print(driver.format_results(found))
    if any(r.name in DRAW_VERIFY_RESULTS for r in found):
        print(describe_results(results))
    print(f"output directory: {out}")
    return 1 if any(not r.ok for r in found) else 0


#: where ``pflt verify`` writes when told nothing (``verify_out``) and where the README's
#: order writes (``pflt verify --quick --out runs/verify``): the two places looked at, in
#: this order, without ``--from``
DEFAULT_RESULTS = (Path("verify_out"), Path("runs") / "verify")


def _verify_results(given: Path | None) -> Path | None:
    """The results.json the verify-summary figures draw: ``--from`` (which must hold one),
    else the first of :data:`DEFAULT_RESULTS` that holds one, else ``None`` (they say so)."""
    if given is None:
        found = [d / "results.json" for d in DEFAULT_RESULTS if (d / "results.json").is_file()]
        return found[0] if found else None
    path = given / "results.json" if given.is_dir() else given
    if not path.is_file():
        raise FileNotFoundError(f"--from {given}: no pflt verify results.json there")
    return path


@contextlib.contextmanager
def _results_env(path: Path | None):
    """Name ``path`` to the figure modules (``$PFLT_RESULTS_JSON``) for the block only; with
    ``None`` a name that holds nothing, so no module searches for results on its own."""
    import os

    from paper_figures._io import RESULTS_ENV_VAR

    before = os.environ.get(RESULTS_ENV_VAR)
    os.environ[RESULTS_ENV_VAR] = str(path.resolve()) if path is not None else ""
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RESULTS_ENV_VAR, None)
        else:
            os.environ[RESULTS_ENV_VAR] = before


def describe_results(path: Path | None) -> str:
    """One line saying which verify results the summary figures drew and what they cover
    (a ``--kind bound`` run is visibly a partial one)."""
    import json
    from collections import Counter

    if path is None:
        return ("verify results drawn: none (no --from, no ./verify_out/results.json, no "
                "./runs/verify/results.json); the verify-summary figures say so")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        checks = [c for c in data.get("checks", []) if isinstance(c, dict)]
        kinds = Counter(str(c.get("kind")) for c in checks)
        from verification.core.papers import entry_paper_id

        papers = {entry_paper_id(c) for c in checks}      # one per paper id, not per string
        env = data.get("environment") or {}
        what = (f"{len(checks)} check(s) of {len(papers)} paper(s), kinds "
                + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                + f"; size {data.get('size', '?')}, seeds {data.get('seeds', '?')}, "
                f"written {env.get('time_utc', '?') if isinstance(env, dict) else '?'}")
        idle = Counter(str(c.get("kind")) for c in checks if c.get("verdict") == "NOT RUN")
        if idle:    # e.g. the worst cases without PEPit: the figures show them missing
            what += ("; NOT RUN: " + ", ".join(f"{n} {k}" for k, n in sorted(idle.items()))
                     + " (the figures say so; pflt verify's report says why)")
    except (OSError, ValueError, AttributeError, TypeError):
        what = "not a readable pflt verify results.json"
    return f"verify results drawn: {path} ({what})"
