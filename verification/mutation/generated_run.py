"""Running the generated formula mutants (:mod:`verification.mutation.generated`): probe
which checks call each formula function, run each mutant against those checks, and count the
kill rate by checks alone per mutant kind and per check kind.  Entry point:
``python -m verification.mutation --generated`` (:mod:`verification.mutation.runner`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterator, Sequence


from verification.core.registry import Check, Verdict, run_check
from verification.core.sensitivity import MEASUREMENT_BASIS, basis_of
from verification.mutation.generated import (CHECK_TIMEOUT_S, MAX_PER_FUNCTION, PROBE_KINDS,
                                             GeneratedMutant, applied, clear_caches,
                                             formula_functions, mutants_of, patched)

_clear_caches = clear_caches


def probe(checks: dict[str, Check], functions: Sequence[tuple[str, str]]
          ) -> tuple[dict[tuple[str, str], list[str]], dict[str, Verdict]]:
    """Which checks call which formula function, and each check's baseline verdict."""
    calls: dict[tuple[str, str], set[str]] = defaultdict(set)
    current: list[str] = []
    baseline: dict[str, Verdict] = {}
    with contextlib.ExitStack() as stack:
        for mod, fn in functions:
            original = getattr(importlib.import_module(mod), fn)

            def counting(*a, __o=original, __key=(mod, fn), **k):
                if current:
                    calls[__key].add(current[0])
                return __o(*a, **k)

            stack.enter_context(patched(mod, fn, functools.wraps(original)(counting)))
        for cid, chk in checks.items():
            current[:] = [cid]
            _clear_caches()
            baseline[cid] = run_check(chk, size="quick", seed=0).verdict
        current.clear()
    _clear_caches()
    return {k: sorted(v) for k, v in calls.items()}, baseline


@dataclass(frozen=True)
class GeneratedResult:
    mutant: GeneratedMutant
    exercised: bool  # applied at least once and never rejected by input validation
    changes: tuple[str, ...]  # "check (kind): BASE → NEW"
    seconds: float
    invalid: bool = False  # the mutated call raised ValueError (left out of the rates)
    timed_out: bool = False  # a check ran past CHECK_TIMEOUT_S (left out of the rates)

    @property
    def killed(self) -> bool:
        return bool(self.changes)

    @property
    def only_informative(self) -> bool:
        """Killed only by VACUOUS → HOLDS changes: the wrong formula made a vacuous bound look
        informative — a verdict change, but not a refutation (reported apart)."""
        return self.killed and all(c.endswith("VACUOUS → HOLDS") for c in self.changes)


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that run_check does not turn it into ERROR."""


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    import signal

    if not hasattr(signal, "SIGALRM"):  # pragma: no cover - not on Windows
        yield
        return

    def handler(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, handler)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_generated(checks: dict[str, Check], *, only: str | None = None,
                  limit: int = MAX_PER_FUNCTION, echo: bool = True,
                  pool_only: str | None = None
                  ) -> tuple[list[GeneratedResult], list[str], dict[tuple[str, str], list[str]]]:
    """Probe, generate, run (module docstring).  Returns (results, unchecked functions,
    function → checks).  ``pool_only``: comma-separated globs on check ids — only those
    checks are probed and run (a subset of the suite: the rates are then of that subset)."""
    import fnmatch

    pool = {cid: c for cid, c in checks.items() if c.kind in PROBE_KINDS}
    if pool_only:
        globs = [g.strip() for g in pool_only.split(",") if g.strip()]
        pool = {cid: c for cid, c in pool.items()
                if any(fnmatch.fnmatchcase(cid, g) for g in globs)}
    functions = formula_functions()
    users, baseline = probe(pool, functions)
    unchecked = [f"{m}:{f}" for m, f in functions if (m, f) not in users]
    results = []
    for (mod, fn), cids in sorted(users.items()):
        for mutant in mutants_of(mod, fn, limit=limit):
            if only and not fnmatch.fnmatchcase(mutant.name, only):
                continue
            start = time.perf_counter()
            changes, timed_out = [], False
            _clear_caches()  # once per mutant: its checks may share experiments run under it
            with applied(mutant) as tracker:
                for cid in cids:
                    try:
                        with _time_limit(CHECK_TIMEOUT_S):
                            v = run_check(pool[cid], size="quick", seed=0).verdict
                    except _Timeout:
                        timed_out = True
                        continue
                    if v is not baseline[cid]:
                        changes.append(f"{cid} ({pool[cid].kind}): {baseline[cid].value} → "
                                       f"{v.value}")
            _clear_caches()
            r = GeneratedResult(mutant, tracker.hits > 0 and not tracker.invalid
                                and not timed_out, tuple(changes),
                                time.perf_counter() - start, tracker.invalid > 0, timed_out)
            results.append(r)
            if echo:
                status = ("KILLED  " if r.killed else "SURVIVED") if r.exercised else \
                    ("TIMEOUT " if r.timed_out else "INVALID " if r.invalid else "UNUSED  ")
                print(f"{status} {mutant.name:55s} [{mutant.kind}] "
                      f"{'; '.join(changes) or ', '.join(cids)}", flush=True)
    return results, unchecked, users


def kill_rates(results: Sequence[GeneratedResult], checks: dict[str, Check],
               users: dict[tuple[str, str], list[str]]) -> dict[str, dict[str, tuple[int, int]]]:
    """``{"mutant kind": {kind: (killed, exercised)}, "check kind": {kind: (killed by a
    check of that kind, exercised mutants that ran a check of that kind)}, "all": {...}}``."""
    used = [r for r in results if r.exercised]
    by_mutant: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_check: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in used:
        by_mutant[r.mutant.kind][0] += r.killed
        by_mutant[r.mutant.kind][1] += 1
        kinds_run = {checks[c].kind for c in users[(r.mutant.module, r.mutant.function)]}
        kinds_killing = {ch.split(" (", 1)[1].split(")", 1)[0] for ch in r.changes}
        for kind in kinds_run:
            by_check[kind][0] += kind in kinds_killing
            by_check[kind][1] += 1
    by_basis: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in used:
        killing = {basis_of(ch.split(" (", 1)[1].split(")", 1)[0]) for ch in r.changes}
        for basis in (MEASUREMENT_BASIS, "code equals our reading"):
            by_basis[basis][0] += basis in killing
            by_basis[basis][1] += 1
    return {"mutant kind": {k: tuple(v) for k, v in sorted(by_mutant.items())},
            "check kind": {k: tuple(v) for k, v in sorted(by_check.items())},
            # of every exercised mutant: killed by a check against measurements, and killed by
            # an identity check (the code against a second writing of our own reading)
            "basis": {k: tuple(v) for k, v in by_basis.items()},
            "all": {"all": (sum(r.killed for r in used), len(used)),
                    "all, not counting VACUOUS → HOLDS alone":
                        (sum(r.killed and not r.only_informative for r in used), len(used))}}


def format_rates(rates: dict[str, dict[str, tuple[int, int]]]) -> list[str]:
    """One line per group; the ``basis`` line says what the kill rate rests on."""
    lines = []
    for group, table in rates.items():
        if group == "basis":
            cells = "; ".join(f"{k} {a}/{b} ({100 * a / b:.0f}%)" if b else f"{k} 0/0"
                              for k, (a, b) in table.items())
            lines.append(f"killed, of all exercised mutants, by {cells} — the identity "
                         f"checks compare the code with a second writing of our own reading "
                         f"(docs/formulas.md): regression checks, not checks against the "
                         f"papers")
            continue
        cells = ", ".join(f"{k} {a}/{b} ({100 * a / b:.0f}%)" if b else f"{k} 0/0"
                          for k, (a, b) in table.items())
        lines.append(f"kill rate by checks alone, per {group}: {cells}")
    return lines
