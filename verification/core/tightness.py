"""The tightness table of ``report.md``: for every ``bound`` / ``envelope`` result, the
theorem, the measured value, the bound, tightness = bound/measured and whether the bound is
vacuous (above the trivial bound: loss range, initial error) — the two questions a
researcher asks of a bound: does it hold on real runs, and how loose is it?

With several seeds the row shows the seed where the bound is tightest (smallest tightness,
the one that decides HOLDS/FAILS).  For ``envelope`` results the "measured" column is the
rise of measured/shape over the grid's second half above the constant fitted on its first
(O(·) upper bounds; the spread max/min for Θ claims), the "bound" the factor fixed in the check,
and the implied constant C is appended.  Rendered by :func:`tightness_markdown`, called from
:func:`verification.core.report.report_markdown`; per-grid data for the figure
``paper_figures/bound_tightness.py`` stays in ``results.json`` (``extra``).
"""

from __future__ import annotations

import math
from typing import Any

from verification.core.registry import BOUND_KINDS, Result, Verdict, json_tightness
from verification.core.suite import SuiteRun

__all__ = ["tightness_rows", "tightness_markdown"]


def _num(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    if math.isinf(v):
        return "∞"
    return f"{v:.3g}"


def _deciding(results: tuple[Result, ...]) -> Result | None:
    """The seed whose tightness is smallest (ERROR results carry none)."""
    usable = [r for r in results if r.verdict is not Verdict.ERROR and r.tightness is not None]
    return min(usable, key=lambda r: float(r.tightness)) if usable else None


def tightness_rows(suite: SuiteRun) -> list[dict[str, Any]]:
    """One dict per ``bound``/``envelope`` check (JSON values): id, reference, kind,
    verdict, measured, bound, tightness (``None`` when the measurement is <= 0, with
    ``tightness_note`` saying so; else the note is ``None``), vacuous (True/False/None),
    C (envelopes), seed."""
    rows = []
    for run in suite.runs:
        if run.check.kind not in BOUND_KINDS:
            continue
        r = _deciding(run.results)
        tightness, note = json_tightness(None if r is None else r.tightness)
        rows.append({"id": run.check.id, "reference": run.check.reference,
                     "kind": run.check.kind, "verdict": run.verdict.value,
                     "measured": None if r is None else r.measured,
                     "bound": None if r is None else r.theoretical,
                     "tightness": tightness, "tightness_note": note,
                     "vacuous": None if r is None else r.vacuous,
                     "trivial": None if r is None else r.trivial,
                     "C": None if r is None else r.extra.get("C"),
                     "certificate": (None if r is None or r.verdict is not Verdict.VACUOUS
                                     else r.certificate),
                     "seed": None if r is None else r.seed})
    return rows


def _certificate_cell(cert: dict | None) -> str:
    """A VACUOUS bound's certificate (value, δ), ``-`` for the others."""
    if cert is None:
        return "-"
    if cert["value"] is None:
        return "n/a"
    return f"{_num(cert['value'])} (δ = {cert['delta']:g})".replace("|", "\\|")


def tightness_markdown(suite: SuiteRun) -> list[str]:
    """The ``## Tightness of the bounds`` section (no lines when the run has no bound or
    envelope check)."""
    rows = tightness_rows(suite)
    if not rows:
        return []
    lines = ["", "## Tightness of the bounds", "",
             "tightness = bound / measured (≥ 1 when the bound holds; ∞ when the measurement "
             "is 0); vacuous = the bound is above the trivial bound (loss range, initial "
             "error), `n/a` where the check states none; certificate = what a held-out or PAC-Bayes "
             "bound on the same trained model certifies beside a vacuous bound (with its δ; "
             "report section VACUOUS names it).  Envelopes: measured = rise of "
             "measured/shape over the grid's second half above the first half's constant "
             "(O(·) upper bounds; the spread max/min for Θ claims), bound = the factor fixed "
             "before the run, C = implied constant.  Row = the seed where the bound is tightest.", "",
             "| theorem | kind | measured | bound | tightness | vacuous? | trivial bound | "
             "certificate | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        vac = {True: "**yes**", False: "no", None: "n/a"}[row["vacuous"]]
        bound = _num(row["bound"]) + (f" (C = {_num(row['C'])})" if row["C"] is not None
                                      else "")
        ref = row["reference"].replace("|", "\\|")
        tight = "∞" if row["tightness_note"] else _num(row["tightness"])
        lines.append(f"| `{row['id']}` — {ref} | {row['kind']} | {_num(row['measured'])} "
                     f"| {bound} | {tight} | {vac} | {_num(row['trivial'])} | "
                     f"{_certificate_cell(row['certificate'])} | **{row['verdict']}** |")
    return lines
