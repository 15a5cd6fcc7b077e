"""The registry of verification checks.

A *check* runs an experiment (or a computation) and returns the measured value(s) next to
the theoretical value(s) with a verdict:

* ``HOLDS`` — the measurement agrees with the claim within the stated tolerance;
* ``FAILS`` — the measurement refutes the claim (a finding, not a crash);
* ``ERROR`` — the check itself broke (an exception); only this makes ``pflt verify`` exit
  non-zero.

Define a check with the :func:`check` decorator in a module of :mod:`verification.checks`
(every module there is imported by :func:`load_all`)::

    @check("pfedme.envelope_gradient", paper="pFedMe (NeurIPS 2020)",
           reference="Proposition 1, eq. (6)", kind="identity",
           tolerance=1e-8, tolerance_reason="float64 finite differences, step 1e-6",
           quick={"dim": 5}, full={"dim": 50})
    def envelope_gradient(ctx: Context) -> Outcome:
        ...
        return Outcome(measured=err, theoretical=0.0, holds=err <= ctx.tolerance)

``ctx.params`` is the ``quick`` or ``full`` dict; ``ctx.seed`` the seed; ``ctx.out_dir`` a
directory where the check may write figures (return their paths in ``Outcome.figures``).
"""

from __future__ import annotations

import importlib
import pkgutil
import time
import traceback
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable

KINDS = ("identity", "inequality", "rate", "selection", "ordering")


class Verdict(str, Enum):
    HOLDS = "HOLDS"
    FAILS = "FAILS"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Context:
    """What a check receives: the size's parameters, a seed, an output directory."""

    size: str
    seed: int
    params: dict[str, Any]
    tolerance: float | None
    out_dir: Path | None = None


@dataclass(frozen=True)
class Outcome:
    """What a check returns. ``holds`` is the check's own comparison of measured against
    theoretical; ``detail`` one line of explanation (numbers welcome)."""

    measured: Any
    theoretical: Any
    holds: bool
    detail: str = ""
    figures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    id: str
    paper: str
    reference: str
    kind: str
    fn: Callable[[Context], Outcome]
    tolerance: float | None
    tolerance_reason: str
    reconstructed: bool = False
    quick: dict[str, Any] = field(default_factory=dict)
    full: dict[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class Result:
    check: Check
    verdict: Verdict
    measured: Any
    theoretical: Any
    detail: str
    seconds: float
    seed: int
    size: str
    figures: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        c = self.check
        return {
            "id": c.id, "paper": c.paper, "reference": c.reference, "kind": c.kind,
            "reconstructed": c.reconstructed, "tolerance": c.tolerance,
            "tolerance_reason": c.tolerance_reason, "verdict": self.verdict.value,
            "measured": _jsonable(self.measured), "theoretical": _jsonable(self.theoretical),
            "detail": self.detail, "seconds": round(self.seconds, 4), "seed": self.seed,
            "size": self.size, "figures": list(self.figures),
        }


_REGISTRY: dict[str, Check] = {}


def check(
    check_id: str, *, paper: str, reference: str, kind: str, tolerance: float | None = None,
    tolerance_reason: str = "", reconstructed: bool = False,
    quick: dict[str, Any] | None = None, full: dict[str, Any] | None = None,
) -> Callable[[Callable[[Context], Outcome]], Callable[[Context], Outcome]]:
    """Register ``fn`` as a check (decorator). Ids are unique, dotted ``paper.name``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if tolerance is not None and not tolerance_reason:
        raise ValueError(f"check {check_id}: a tolerance needs a tolerance_reason")

    def decorate(fn: Callable[[Context], Outcome]) -> Callable[[Context], Outcome]:
        if check_id in _REGISTRY and _REGISTRY[check_id].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"duplicate check id {check_id!r}")
        _REGISTRY[check_id] = Check(
            id=check_id, paper=paper, reference=reference, kind=kind, fn=fn,
            tolerance=tolerance, tolerance_reason=tolerance_reason,
            reconstructed=reconstructed, quick=dict(quick or {}),
            full=dict(full or quick or {}), description=(fn.__doc__ or "").strip(),
        )
        return fn

    return decorate


def load_all() -> dict[str, Check]:
    """Import every module of :mod:`verification.checks` and return the registry."""
    import verification.checks as checks

    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"verification.checks.{info.name}")
    return dict(sorted(_REGISTRY.items()))


def run_check(chk: Check, *, size: str = "quick", seed: int = 0,
              out_dir: Path | None = None) -> Result:
    """Run one check; an exception inside the check becomes an ``ERROR`` result."""
    if size not in ("quick", "full"):
        raise ValueError(f"size must be 'quick' or 'full', got {size!r}")
    params = chk.quick if size == "quick" else chk.full
    ctx = Context(size=size, seed=seed, params=dict(params), tolerance=chk.tolerance,
                  out_dir=out_dir)
    start = time.perf_counter()
    try:
        out = chk.fn(ctx)
        if not isinstance(out, Outcome):
            raise TypeError(f"check {chk.id} returned {type(out).__name__}, not Outcome")
        verdict = Verdict.HOLDS if bool(out.holds) else Verdict.FAILS
        return Result(chk, verdict, out.measured, out.theoretical, out.detail,
                      time.perf_counter() - start, seed, size, tuple(out.figures))
    except Exception as exc:  # the check broke: report, do not crash the suite
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Result(chk, Verdict.ERROR, None, None, tb, time.perf_counter() - start,
                      seed, size)


def _jsonable(value: Any) -> Any:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if np is not None and isinstance(value, np.ndarray):
        return value.tolist()
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value
