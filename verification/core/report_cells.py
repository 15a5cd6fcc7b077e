"""Cells and lines of the report: a value's compact rendering (:func:`short`) and what a number
rests on (issue 33): the three numbers
of a worst-case check (engine / worst case / bound, with "= bound within solver tolerance"),
a vacuous bound beside its trivial bound, its certificate and the measurement, and the checks
that did not run with their reason.  Used by :mod:`verification.core.report`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verification.core.registry import _jsonable

if TYPE_CHECKING:  # pragma: no cover
    from verification.core.registry import Result
    from verification.core.suite import CheckRun, SuiteRun

__all__ = ["short", "worst_case_cells", "value_cells", "certificate_text", "not_run_lines"]

MAX_CELL = 48  # characters of a value shown in a table cell


def short(value: Any, width: int | None = MAX_CELL) -> str:
    """A compact one-line rendering of a measured/theoretical value: a list shows its first
    four items and how many more (``+8 more``: every value is in results.json); ``width``
    cuts the text with ``…`` (``None``: never — report.md and the console table wrap
    instead)."""
    value = _jsonable(value)
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = str(value)
    elif isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, (list, tuple)):
        items = [short(v, None) for v in value[:4]]
        text = "[" + ", ".join(items) + (f", +{len(value) - 4} more" if len(value) > 4 else "") + "]"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={short(v, None)}" for k, v in value.items())
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def worst_case_cells(run: "CheckRun") -> tuple[str, str, str]:
    """``(engine, worst case, bound)`` of a ``worst_case`` result as printed: a worst case
    above its bound but within the check's solver tolerance reads ``1013 = bound within solver
    tolerance (2%)`` (its verdict is HOLDS by that tolerance, which the reader must see)."""
    r0 = run.results[0]
    engine = r0.extra.get("measured_engine")
    worst = r0.extra.get("worst_case", r0.measured)
    bound = r0.extra.get("bound", r0.theoretical)
    w_text = short(worst, None)
    tol = run.check.tolerance
    try:
        w, b = float(worst), float(bound)
    except (TypeError, ValueError):
        w = b = None
    if (w is not None and tol and b > 0 and b < w <= b * (1 + tol)
            and run.verdict.value not in ("NOT RUN", "ERROR")):
        w_text = f"{w:.4g} = bound within solver tolerance ({100 * tol:.2g}%)"
    return short(engine, None), w_text, short(bound, None)


def value_cells(run: "CheckRun") -> tuple[str, str]:
    """The measured / theoretical cells of a row; for a ``worst_case`` check the engine and
    the worst case over the class on the left, the bound on the right, each named."""
    r0 = run.results[0]
    if run.check.kind == "worst_case" and run.verdict.value not in ("NOT RUN", "ERROR"):
        engine, worst, bound = worst_case_cells(run)
        return f"worst case {worst} (engine {engine})", f"bound {bound}"
    return short(r0.measured, None), short(r0.theoretical, None)


def certificate_text(r: "Result") -> str:
    """``163.5 / 9.07 / 0.41 (held-out kl bound …, δ = 0.05) / 0.06`` for a VACUOUS result:
    the paper's bound beside the trivial one, what is certifiable at this size, and the
    measurement."""
    cert = r.certificate
    value = "n/a" if cert["value"] is None else f"{cert['value']:.4g}"
    delta = "" if cert["delta"] is None else f", δ = {cert['delta']:g}"
    return (f"{short(r.theoretical, None)} / {short(r.trivial, None)} / {value} "
            f"({cert['name']}{delta}) / {short(r.measured, None)}")


def not_run_lines(suite: "SuiteRun") -> list[str]:
    """One line per reason the checks that did not run give: ``9 not run: PEPit is not
    installed: install with pip install -e '.[pep]'``."""
    reasons: dict[str, int] = {}
    for run in suite.runs:
        if run.verdict.value == "NOT RUN":
            r = next((r for r in run.results if r.verdict.value == "NOT RUN"), run.results[0])
            why = str(r.extra.get("not_run_reason") or r.detail or "reason not stated")
            reasons[why] = reasons.get(why, 0) + 1
    return [f"{n} not run: {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1])]
