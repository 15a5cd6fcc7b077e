"""The registry of verification checks.

A *check* runs an experiment (or a computation) and returns the measured value(s) next to
the theoretical value(s) with a verdict:

* ``HOLDS`` — the measurement agrees with the claim within the stated tolerance;
* ``FAILS`` — the measurement refutes the claim (a finding, not a crash);
* ``ERRATUM`` — the formula as printed is contradicted and the corrected reading holds;
* ``INCONCLUSIVE`` — the experiment at this size cannot decide (a confidence interval
  straddles the claim, too few clients or seeds);
* ``VACUOUS`` — a ``bound`` that holds but exceeds the trivial bound of its quantity (the
  loss range, log of the number of sampled functions, ρ_g²/K …) at every point checked: it
  says nothing the trivial bound does not, so it is not counted as HOLDS (set by
  :func:`run_check` from ``Outcome.vacuous``; the report prints the trivial bound beside it);
* ``NOT RUN`` — an optional dependency is missing (e.g. PEPit for the worst-case checks),
  or the real-data results a reproduction check judges are absent: nothing was computed;
  the result's ``extra['not_run_reason']`` says what to install or run (counted apart in
  the summary, never as INCONCLUSIVE);
* ``ERROR`` — the check itself broke (an exception); only this makes ``pflt verify`` exit
  non-zero.

A check returns ``Outcome(holds=...)`` for HOLDS/FAILS, or sets ``Outcome.verdict`` to
``Verdict.ERRATUM`` / ``Verdict.INCONCLUSIVE`` explicitly (``holds`` is then ignored).

Kinds: ``identity``, ``inequality``, ``rate``, ``selection``, ``ordering`` and the two
numerical-bound kinds:

* ``bound`` — a theorem's right-hand side evaluated with constants computed or estimated
  from the problem that was run, against the measured left-hand side; build the outcome
  with :func:`bound_outcome` (HOLDS iff measured <= bound; records ``tightness`` =
  bound/measured and ``vacuous`` = bound above the trivial bound).
* ``envelope`` — an O(.) statement with hidden constants: measured/shape over a grid
  spanning >= 1.5 decades per variable; build it with :func:`envelope_outcome` (one-sided
  for an upper bound: the second half of the grid may not rise above the constant fitted on
  the first by more than a factor fixed in the check's definition; two-sided max/min only for
  a Θ claim; verification/core/envelope.py).
* ``worst_case`` — measured (engine) <= exact worst case over the theorem's function class
  (a performance-estimation problem) <= the theorem's bound; build it with
  :func:`verification.worst_case.outcome.worst_case_outcome` (tightness = bound/worst case).

Define a check with the :func:`check` decorator in a module of :mod:`verification.checks`
(every module there is imported by :func:`load_all`) or in a module of your own loaded as a
plugin (``PFLT_PLUGINS``, ``pflt --plugin``: :mod:`pfl_theory.plugins`, docs/extending.md)::

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

import functools
import importlib
import importlib.util
import math
import pkgutil
import re
import time
import traceback
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable

KINDS = ("identity", "inequality", "rate", "selection", "ordering", "bound", "envelope",
         "worst_case")
BOUND_KINDS = ("bound", "envelope", "worst_case")


class Verdict(str, Enum):
    HOLDS = "HOLDS"
    FAILS = "FAILS"
    ERRATUM = "ERRATUM"
    INCONCLUSIVE = "INCONCLUSIVE"
    VACUOUS = "VACUOUS"
    NOT_RUN = "NOT RUN"
    ERROR = "ERROR"


#: worst first: the aggregate over seeds is the first of these that any seed has
VERDICT_PRECEDENCE = (Verdict.ERROR, Verdict.FAILS, Verdict.ERRATUM, Verdict.INCONCLUSIVE,
                      Verdict.NOT_RUN, Verdict.VACUOUS, Verdict.HOLDS)

#: what an ERRATUM verdict rests on (``Outcome.erratum_basis``): ``algebra`` = the formula as
#: printed is inconsistent and our correction makes it consistent by algebra on our own
#: expressions (the correction itself is unproven); ``measured`` = a measurement contradicts
#: the printed formula and agrees with the corrected one
ERRATUM_BASES = {
    "algebra": "inconsistent as printed; our correction makes it consistent (algebra, "
               "correction unproven)",
    "measured": "measured contradiction of the printed formula; the corrected reading agrees "
                "with the measurement",
}


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
    verdict: "Verdict | None" = None  # ERRATUM / INCONCLUSIVE set explicitly
    tightness: float | None = None  # bound / measured (``bound`` and ``envelope`` kinds)
    vacuous: bool | None = None  # bound above the trivial bound (loss range, initial error)
    extra: dict[str, Any] = field(default_factory=dict)  # per-grid-point data, constants
    sensitivity: float | None = None  # set by the check to override the kind's rule
    sensitivity_note: str = ""  # (verification/core/sensitivity.py)
    erratum_basis: str | None = None  # ERRATUM only: a key of ERRATUM_BASES


#: why a bound result's tightness is ``null`` in results.json: bound / measured with a
#: measurement of 0 (or below) is no finite number (report.md shows ∞)
UNBOUNDED_TIGHTNESS = "measured <= 0: bound / measured has no finite value (shown as ∞)"


def json_tightness(tightness: float | None) -> tuple[float | None, str | None]:
    """``(value, note)`` for JSON: a finite tightness as it is, an infinite one as ``None``
    with the note :data:`UNBOUNDED_TIGHTNESS` (``None`` stays ``None``, no note)."""
    if tightness is None or math.isfinite(float(tightness)):
        return tightness, None
    return None, UNBOUNDED_TIGHTNESS


def bound_outcome(measured: float, bound: float, *, trivial: float | None = None,
                  detail: str = "", figures: tuple[str, ...] = (),
                  extra: dict[str, Any] | None = None) -> Outcome:
    """Outcome of a ``bound`` check: HOLDS iff ``measured <= bound``; ``tightness`` =
    bound / measured (>= 1 when it holds; inf if measured is <= 0, written to results.json
    as ``null`` with ``tightness_note`` = :data:`UNBOUNDED_TIGHTNESS`); ``vacuous`` iff ``trivial``
    is given and ``bound >= trivial`` (the bound says no more than the trivial one)."""
    measured, bound = float(measured), float(bound)
    if measured != measured or bound != bound:
        raise ValueError(f"bound check got NaN (measured={measured}, bound={bound})")
    tight = bound / measured if measured > 0 else float("inf")
    vac = None if trivial is None else bool(bound >= float(trivial))
    extra = {**({} if trivial is None else {"trivial": float(trivial)}), **dict(extra or {})}
    shown = f"{tight:.3g}" if math.isfinite(tight) else "∞ (measured ≤ 0)"
    line = f"measured {measured:.4g} <= bound {bound:.4g}? tightness {shown}"
    if vac is not None:
        line += f"; trivial bound {float(trivial):.4g}" + (" (VACUOUS)" if vac else "")
    return Outcome(measured=measured, theoretical=bound, holds=measured <= bound,
                   detail=f"{line}; {detail}" if detail else line, figures=tuple(figures),
                   tightness=tight, vacuous=vac, extra=extra)


def envelope_outcome(measured: Any, shape: Any, *, factor: float, claim: str = "upper",
                     grid: Any = None, name: str = "x", explicit: bool = False,
                     detail: str = "", figures: tuple[str, ...] = (),
                     extra: dict[str, Any] | None = None) -> Outcome:
    """Outcome of an ``envelope`` check over a grid (ratio_j = measured_j / shape_j), by the
    rules of :mod:`verification.core.envelope`: for an O(·) upper bound (``claim="upper"``)
    one-sided — the constant fitted on the first half of the grid, the second half may rise
    above it by at most ``factor``; for a Θ claim (``claim="exact"``) the spread max/min of
    the ratio within ``factor``; with ``grid`` (values of the variable ``name``) the slopes and
    the INCONCLUSIVE rules (a grid on which neither side moves; ``explicit`` bounds: a flat
    measurement below the bound).  ``measured`` is the statistic (rise or spread),
    ``theoretical`` the factor, ``tightness`` = factor / statistic, and the implied constant
    C = max(ratio) (so that measured <= C · shape on the whole grid) goes to ``extra['C']``."""
    from verification.core.envelope import envelope_rule

    verdict, stat, line, info = envelope_rule(measured, shape, factor=factor, claim=claim,
                                              grid=grid, name=name, explicit=explicit)
    info = {**info, **dict(extra or {})}
    return Outcome(measured=stat, theoretical=float(factor), holds=verdict == "HOLDS",
                   verdict=Verdict.INCONCLUSIVE if verdict == "INCONCLUSIVE" else None,
                   detail=f"{line}; {detail}" if detail else line, figures=tuple(figures),
                   tightness=float(factor) / stat, vacuous=None, extra=info)


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
    #: the canonical id of ``paper`` (verification/core/papers.py); filled in when not given
    paper_id: str = ""
    #: the paper string as the check was declared with (``paper`` is the display name)
    cited: str = ""

    def __post_init__(self) -> None:
        from verification.core.papers import paper_id

        if not self.paper_id:
            object.__setattr__(self, "paper_id", paper_id(self.paper))
        if not self.cited:
            object.__setattr__(self, "cited", self.paper)


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
    tightness: float | None = None
    vacuous: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sensitivity: float | None = None
    sensitivity_note: str = ""
    erratum_basis: str | None = None

    @property
    def certificate(self) -> dict[str, Any]:
        """``{"value", "name", "delta"}`` a check put beside its bound (``extra['certificate']``
        — verification/estimators/certificates.py), or a record saying none was computed."""
        cert = self.extra.get("certificate")
        if isinstance(cert, dict) and {"value", "name", "delta"} <= set(cert):
            return {k: cert[k] for k in ("value", "name", "delta")}
        return {"value": None, "name": "none computed by this check", "delta": None}

    @property
    def trivial(self) -> float | None:
        """The trivial bound at the deciding point (``bound`` checks that state one)."""
        value = self.extra.get("trivial")
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        c = self.check
        out = {
            "id": c.id, "paper": c.paper, "paper_id": c.paper_id, "reference": c.reference,
            "kind": c.kind, "reconstructed": c.reconstructed, "tolerance": c.tolerance,
            "tolerance_reason": c.tolerance_reason, "verdict": self.verdict.value,
            "measured": _jsonable(self.measured), "theoretical": _jsonable(self.theoretical),
            "detail": self.detail, "seconds": round(self.seconds, 4), "seed": self.seed,
            "size": self.size, "figures": list(self.figures),
        }
        if c.kind in BOUND_KINDS or self.tightness is not None:
            out["tightness"], note = json_tightness(self.tightness)
            if note:
                out["tightness_note"] = note
            out["vacuous"] = self.vacuous
            out["trivial"] = self.trivial
        out["sensitivity"] = (None if self.sensitivity is None or not
                              math.isfinite(self.sensitivity) else self.sensitivity)
        out["sensitivity_note"] = self.sensitivity_note
        if self.verdict is Verdict.ERRATUM:
            out["erratum_basis"] = self.erratum_basis
        if self.verdict is Verdict.VACUOUS:
            # what is knowable at this size (verification/estimators/certificates.py)
            out["certificate"] = self.certificate
        if self.extra:
            out["extra"] = _jsonable(self.extra)
        return out


_REGISTRY: dict[str, Check] = {}

#: the package of the built-in checks
BUILTIN_PACKAGE = "verification.checks"
#: a check declared with a literal id: ``@check("paper.name", …)``
DECLARED = re.compile(r"""@check\(\s*(["'])([^"']+)\1""")


class DuplicateCheckError(ValueError):
    """Two checks under one id; the message names both (one line), ``modules`` the two
    modules."""

    def __init__(self, message: str, modules: tuple[str, ...] = ()):
        super().__init__(message)
        self.modules = modules


@functools.lru_cache(maxsize=1)
def builtin_ids() -> dict[str, str]:
    """``{check id: module}`` of the built-in checks declared with a literal id, read from
    the sources of :data:`BUILTIN_PACKAGE` without importing them."""
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    out: dict[str, str] = {}
    for info in pkgutil.iter_modules(spec.submodule_search_locations if spec else []):
        path = Path(info.module_finder.path) / f"{info.name}.py"
        if path.is_file():
            for m in DECLARED.finditer(path.read_text(encoding="utf-8")):
                out.setdefault(m.group(2), f"{BUILTIN_PACKAGE}.{info.name}")
    return out


def _clash(check_id: str, fn: Callable) -> DuplicateCheckError | None:
    """Why ``fn`` may not be registered under ``check_id``, or None: another function holds
    the id, or ``fn`` is not built-in and the id is a built-in check's (refused before the
    built-in module is imported, so that the built-in stays whole)."""
    where = f"{fn.__module__}.{fn.__qualname__}"
    old = _REGISTRY.get(check_id)
    if old is not None and (old.fn.__module__, old.fn.__qualname__) != (fn.__module__,
                                                                        fn.__qualname__):
        if old.fn.__qualname__ != fn.__qualname__ or not _same_file(old.fn, fn):
            return DuplicateCheckError(
                f"duplicate check id {check_id!r}: {where} and "
                f"{old.fn.__module__}.{old.fn.__qualname__} both register it",
                (fn.__module__, old.fn.__module__))
    builtin = None if _builtin_module(fn.__module__) else builtin_ids().get(check_id)
    if builtin:
        return DuplicateCheckError(
            f"check id {check_id!r} of {where} is the id of a built-in check (in "
            f"{builtin}): give your check another id", (fn.__module__, builtin))
    return None


def _builtin_module(module: str) -> bool:
    """Whether ``module`` is part of the package (the :mod:`verification` tree)."""
    return module == "verification" or module.startswith("verification.")


def _same_file(a: Callable, b: Callable) -> bool:
    """Whether two functions come from the same source file (one module imported twice)."""
    fa, fb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return fa is not None and fb is not None and fa.co_filename == fb.co_filename


def check(
    check_id: str, *, paper: str, reference: str, kind: str, tolerance: float | None = None,
    tolerance_reason: str = "", reconstructed: bool = False,
    quick: dict[str, Any] | None = None, full: dict[str, Any] | None = None,
) -> Callable[[Callable[[Context], Outcome]], Callable[[Context], Outcome]]:
    """Register ``fn`` as a check (decorator). Ids are unique, dotted ``paper.name``.
    ``paper`` is an id of :data:`verification.core.papers.PAPERS` or a string it maps
    (``CITED``); the check's ``paper`` becomes the table's display name, ``paper_id`` the
    id and ``cited`` the string as given (an unknown string stays as it is)."""
    from verification.core.papers import display_name, paper_id

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if tolerance is not None and not tolerance_reason:
        raise ValueError(f"check {check_id}: a tolerance needs a tolerance_reason")

    def decorate(fn: Callable[[Context], Outcome]) -> Callable[[Context], Outcome]:
        clash = _clash(check_id, fn)
        if clash is not None:
            raise clash
        _REGISTRY[check_id] = Check(
            id=check_id, paper=display_name(paper), reference=reference, kind=kind, fn=fn,
            tolerance=tolerance, tolerance_reason=tolerance_reason,
            reconstructed=reconstructed, quick=dict(quick or {}),
            full=dict(full or quick or {}), description=(fn.__doc__ or "").strip(),
            paper_id=paper_id(paper), cited=paper,
        )
        return fn

    return decorate


def load_all() -> dict[str, Check]:
    """Import every module of :mod:`verification.checks` and the user's plugins
    (:mod:`pfl_theory.plugins`) and return the registry."""
    import verification.checks as checks
    from pfl_theory.plugins import load_plugins

    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"verification.checks.{info.name}")
    load_plugins()
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
        if out.verdict is not None:
            verdict = Verdict(out.verdict)
            if verdict is Verdict.ERROR:
                raise ValueError("a check reports ERROR by raising, not by its Outcome")
        else:
            verdict = Verdict.HOLDS if bool(out.holds) else Verdict.FAILS
        if chk.kind in BOUND_KINDS:
            _require_numeric(chk, out)
        if verdict is Verdict.HOLDS and chk.kind == "bound" and out.vacuous:
            verdict = Verdict.VACUOUS
        if out.erratum_basis is not None and out.erratum_basis not in ERRATUM_BASES:
            raise ValueError(f"check {chk.id}: erratum_basis must be one of "
                             f"{sorted(ERRATUM_BASES)}, got {out.erratum_basis!r}")
        if out.sensitivity is not None or out.sensitivity_note:
            sens, note = out.sensitivity, out.sensitivity_note
        else:
            from verification.core.sensitivity import sensitivity_of

            sens, note = sensitivity_of(chk.kind, verdict.value, out.measured, out.theoretical,
                                        tolerance=chk.tolerance, detail=out.detail,
                                        extra=out.extra)
        return Result(chk, verdict, out.measured, out.theoretical, out.detail,
                      time.perf_counter() - start, seed, size, tuple(out.figures),
                      out.tightness, out.vacuous, dict(out.extra), sens, note,
                      out.erratum_basis)
    except Exception as exc:  # the check broke: report, do not crash the suite
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Result(chk, Verdict.ERROR, None, None, tb, time.perf_counter() - start,
                      seed, size)


def _require_numeric(chk: Check, out: Outcome) -> None:
    """``bound``/``envelope`` results must carry numbers: measured, bound, tightness."""
    for name in ("measured", "theoretical", "tightness"):
        value = getattr(out, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                float(value)
            except (TypeError, ValueError):
                raise TypeError(f"check {chk.id} (kind {chk.kind}) must return a numeric "
                                f"{name}, got {value!r}") from None


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
