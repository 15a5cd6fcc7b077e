"""Mutation run: does the verification suite notice plausible bugs?

``python -m verification.mutation [--quick] [--only GLOB]`` applies every mutant of
:data:`verification.mutation.catalogue.CATALOGUE` in-process (monkeypatching the target
function or method, and every module that imported it by name), runs the checks the mutant
names at quick size (seed 0) and compares each verdict with the unmutated run.  A mutant is
**killed** when some check's verdict changes (HOLDS → FAILS, ERRATUM → HOLDS, …) or the
check raises (ERROR); otherwise it **survives**.  ``--quick`` runs only the first named
check of each mutant; ``--with-tests`` also runs the fast unit tests a mutant names (pytest,
in-process, under the same patch) and counts a failing test as a kill.  Prints one line per mutant, the survivors, and as last line
``mutation kill rate: K/N``.  ``--generated`` runs the mutants generated from the formula
functions instead (:mod:`verification.mutation.generated`) and prints the kill rate by
checks alone per mutant kind and per check kind.  Not part of CI's default run (a few minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import importlib
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from verification.mutation import generated_run as G
from verification.mutation.catalogue import CATALOGUE, EXPLAINED_SURVIVORS, Mutant
from verification.mutation.generated import clear_caches as _clear_caches
from verification.core.registry import Check, Verdict, run_check
from verification.core.runner import load_checks


def _resolve(target: str) -> tuple[Any, str, Any]:
    """``"pkg.mod:Class.attr"`` → (owner object, attribute name, current value)."""
    module_name, _, qual = target.partition(":")
    if not qual:
        raise ValueError(f"target must be 'module:name', got {target!r}")
    owner: Any = importlib.import_module(module_name)
    *path, attr = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, attr, getattr(owner, attr)


@contextlib.contextmanager
def applied(mutant: Mutant) -> Iterator[None]:
    """Apply ``mutant`` for the duration of the block (restored afterwards, even on error).
    Module-level functions are also replaced in every loaded module that bound the same
    object under the same name (``from x import f``)."""
    owner, attr, original = _resolve(mutant.target)
    replacement = mutant.make(original)
    patched = [(owner, attr, original)]
    setattr(owner, attr, replacement)
    if not isinstance(owner, type):
        for mod in list(sys.modules.values()):
            if mod is None or mod is owner:
                continue
            if getattr(mod, attr, None) is original:
                patched.append((mod, attr, original))
                setattr(mod, attr, replacement)
    try:
        yield
    finally:
        for obj, name, value in reversed(patched):
            setattr(obj, name, value)




@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    killed: bool
    changes: tuple[str, ...]  # "check: BASE → NEW"
    seconds: float


def _verdict(chk: Check) -> tuple[Verdict, str]:
    _clear_caches()
    res = run_check(chk, size="quick", seed=0)
    return res.verdict, res.detail


def _tests_fail(node_ids: Sequence[str]) -> bool:
    """Run pytest in-process on ``node_ids`` (quietly); True iff a test fails or errors."""
    import pytest

    return pytest.main(["-q", "-x", "-p", "no:cacheprovider", "--no-header", "-o",
                        "addopts=", *node_ids]) != 0


def run_mutants(mutants: Sequence[Mutant], *, quick: bool = False, with_tests: bool = False,
                checks: dict[str, Check] | None = None, echo: bool = True
                ) -> list[MutantResult]:
    """Run each mutant against its checks; baseline verdicts computed once per check."""
    if checks is None:
        checks, errors = load_checks()
        if errors:
            raise RuntimeError(f"check modules failed to import: {errors}")
    baseline: dict[str, Verdict] = {}
    out = []
    for m in mutants:
        ids = m.checks[:1] if quick else m.checks
        missing = [c for c in ids if c not in checks]
        if missing:
            raise ValueError(f"mutant {m.name} names unknown checks {missing}")
        for cid in ids:
            if cid not in baseline:
                baseline[cid] = _verdict(checks[cid])[0]
        start = time.perf_counter()
        changes = []
        with applied(m):
            for cid in ids:
                v, _ = _verdict(checks[cid])
                if v is not baseline[cid]:
                    changes.append(f"{cid}: {baseline[cid].value} → {v.value}")
            if with_tests and not changes and m.tests:
                with contextlib.redirect_stdout(sys.stderr):
                    if _tests_fail(m.tests):
                        changes.append(f"tests fail: {', '.join(m.tests)}")
        _clear_caches()
        r = MutantResult(m, bool(changes), tuple(changes), time.perf_counter() - start)
        out.append(r)
        if echo:
            status = "KILLED  " if r.killed else "SURVIVED"
            print(f"{status} {m.name:34s} [{m.kind}] {'; '.join(changes) or ', '.join(ids)}",
                  flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verification.mutation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the first check of each mutant")
    ap.add_argument("--only", default=None, help="glob on mutant names")
    ap.add_argument("--with-tests", action="store_true",
                    help="also run each mutant's named unit tests (kills count)")
    ap.add_argument("--generated", action="store_true",
                    help="run the mutants generated from the pfl_theory formulas instead "
                         "(verification/mutation/generated.py): kill rate by checks alone")
    ap.add_argument("--checks", default=None,
                    help="with --generated: only the checks whose id matches these globs "
                         "(comma-separated) are probed and run — a subset of the suite")
    ap.add_argument("--out", default=None,
                    help="with --generated: also write the kill rates to this JSON file (read "
                         "by python -m paper_figures.readme_blocks for the README)")
    args = ap.parse_args(argv)
    if args.generated:
        return _main_generated(args.only, args.out, args.checks)
    mutants = [m for m in CATALOGUE if args.only is None or fnmatch.fnmatchcase(m.name, args.only)]
    if not mutants:
        print(f"--only {args.only!r} matches no mutant", file=sys.stderr)
        return 2
    results = run_mutants(mutants, quick=args.quick, with_tests=args.with_tests)
    survivors = [r.mutant.name for r in results if not r.killed]
    print(f"survivors: {', '.join(survivors) if survivors else 'none'}")
    for name in survivors:
        print(f"  {name}: {EXPLAINED_SURVIVORS.get(name, 'NOT EXPLAINED — add a check or test')}")
    print(f"mutation kill rate: {sum(r.killed for r in results)}/{len(results)}")
    print(kill_basis_line(results, load_checks()[0]))
    return 0


def kill_basis_line(results: Sequence[MutantResult], checks: dict[str, Check]) -> str:
    """What the kill rate rests on: mutants killed by a check against measurements, by an
    identity check (code equals our reading), by the named unit tests."""
    from verification.core.sensitivity import MEASUREMENT_BASIS, basis_of

    counts = {MEASUREMENT_BASIS: 0, "code equals our reading": 0, "unit tests": 0}
    for r in results:
        bases = {"unit tests" if ch.startswith("tests fail:") else
                 basis_of(checks[ch.split(":", 1)[0]].kind) if ch.split(":", 1)[0] in checks
                 else "other" for ch in r.changes}
        for basis in counts:
            counts[basis] += basis in bases
    n = len(results)
    return "killed by " + "; ".join(f"{k} {v}/{n}" for k, v in counts.items()) + \
        " (identity checks compare the code with a second writing of our own reading)"


def write_rates(path: str, rates: dict, *, only: str | None, seconds: float,
                checks: str | None = None, commit: str | None = None) -> None:
    """The kill rates of a ``--generated`` run as JSON, with when, where and on what."""
    import json
    import platform
    import subprocess
    from datetime import datetime, timezone
    from pathlib import Path

    if commit is None:
        commit = _head()
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit, "machine": f"{platform.machine()} {platform.system()}",
            "only": only, "checks": checks, "seconds": round(seconds),
            "rates": {g: {k: list(v) for k, v in t.items()} for g, t in rates.items()}}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _head() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _main_generated(only: str | None, out: str | None = None, pool: str | None = None) -> int:
    import time

    start, commit = time.perf_counter(), _head()   # the code the run measured
    checks, errors = load_checks()
    if errors:
        raise RuntimeError(f"check modules failed to import: {errors}")
    results, unchecked, users = G.run_generated(checks, only=only, pool_only=pool)
    if not results:
        print(f"--only {only!r} matches no generated mutant", file=sys.stderr)
        return 2
    print(f"formula functions called by no check ({len(unchecked)}): {', '.join(unchecked)}")
    unused = sum(not r.exercised and not r.invalid and not r.timed_out for r in results)
    print(f"mutants not exercised (their change never applied): {unused}; rejected by the "
          f"formula's input validation: {sum(r.invalid for r in results)}; a check ran past "
          f"{G.CHECK_TIMEOUT_S} s: {sum(r.timed_out for r in results)}")
    rates = G.kill_rates(results, checks, users)
    for line in G.format_rates(rates):
        print(line)
    if out:
        write_rates(out, rates, only=only, seconds=time.perf_counter() - start, checks=pool,
                    commit=commit)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
