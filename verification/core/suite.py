"""The types of a suite run, shared by :mod:`verification.core.runner` (which produces them) and
:mod:`verification.core.report` (which renders them) — so neither imports the other.

A check runs once per seed (a :class:`~verification.core.registry.Result` each); a
:class:`CheckRun` holds those results and their aggregate verdict; a :class:`SuiteRun` holds
every check of one ``pflt verify``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from verification.core.registry import VERDICT_PRECEDENCE, Check, Result, Verdict


@dataclass(frozen=True)
class CheckRun:
    """One check over all seeds: the aggregate verdict and the per-seed results."""

    check: Check
    verdict: Verdict
    results: tuple[Result, ...]
    #: process CPU seconds over all seeds (``None``: not measured, e.g. kept from an
    #: interrupted run that predates the measurement)
    cpu_seconds: float | None = None

    @property
    def seeds_holding(self) -> int:
        return sum(r.verdict is Verdict.HOLDS for r in self.results)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)


@dataclass(frozen=True)
class SuiteRun:
    """Everything one ``pflt verify`` produced."""

    runs: tuple[CheckRun, ...]
    size: str
    seeds: tuple[int, ...]
    environment: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for run in self.runs:
            out[run.verdict.value] += 1
        out["total"] = len(self.runs)
        return out

    @property
    def exit_code(self) -> int:
        """Non-zero only when a check (or a check module) broke."""
        return 1 if any(r.verdict is Verdict.ERROR for r in self.runs) else 0


def aggregate(results: Iterable[Result]) -> Verdict:
    """The worst verdict over seeds, in the order ERROR > FAILS > ERRATUM > INCONCLUSIVE >
    NOT RUN > VACUOUS > HOLDS (a claim holds only if it holds on every seed; needs >= 1 result)."""
    verdicts = [r.verdict for r in results]
    if not verdicts:
        raise ValueError("cannot aggregate an empty list of results")
    for v in VERDICT_PRECEDENCE:
        if v in verdicts:
            return v
    return Verdict.HOLDS  # pragma: no cover - VERDICT_PRECEDENCE lists every verdict
