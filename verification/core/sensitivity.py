"""Sensitivity of a check: the smallest change of its theoretical side that flips its verdict.

A check that HOLDS with a bound 1,000× above the measurement cannot tell the printed formula
from one that is wrong by a factor 500; a researcher needs to know that number.  Every
result carries ``sensitivity`` (a factor ``f`` ≥ 1, or ``None``) and ``sensitivity_note``
(how it was obtained, or ``n/a: <reason>``).  ``f`` is the smallest multiplicative error
``×f`` or ``÷f`` of the theoretical side that changes the verdict — the suite "detects
formula errors larger than ×f":

* ``bound``: HOLDS and VACUOUS → bound/measured at the deciding (tightest) grid point (the
  bound must be divided by that much to FAIL; for a VACUOUS bound the note adds the smaller
  factor min_j bound_j/trivial_j that would make it look informative — a verdict change
  that detects nothing); FAILS → measured/bound;
* ``envelope``: a constant factor of the shape is invisible by design; what flips it is a
  shape error that distorts measured/shape across the grid: HOLDS → factor/spread, FAILS →
  spread/factor (a distortion of the shape's max/min over the grid by more than that);
* ``inequality`` with scalar sides ``measured ≤ theoretical`` (both > 0): like a bound;
* ``identity``: the tolerance, read as a relative error (the identity checks compare
  relative deviations, or differences of O(1) quantities); exact equalities (tolerance 0)
  detect any change (f = 1);
* ``rate``: the exponent's confidence interval [lo, hi] against the claimed exponent p
  (parsed from :func:`verification.core.verdicts.rate_three_way`'s detail): the relative
  change of p that moves it across the nearest end of the interval, expressed as
  f = 1 + |Δp|/|p| (a factor on the exponent, not on the value);
* ``worst_case`` (measured = the PEP worst case, theoretical = the bound): HOLDS →
  bound/worst (the bound divided by that much falls below the worst case over the class:
  a counterexample, or INCONCLUSIVE for a valid-not-exact worst case), FAILS and ERRATUM →
  worst/bound;
* ``selection``, ``ordering`` and dict-valued comparisons: ``n/a`` with the reason.

A check may set ``Outcome.sensitivity`` / ``Outcome.sensitivity_note`` itself; then these
rules are not applied.  :func:`summarise` gives the line ``pflt verify`` prints: the checks
against measurements and the identity checks (code equals our reading) apart, FAILS and
ERRATUM left out (their factor is a distance from holding, not detection power).
"""

from __future__ import annotations

import math
import re
from statistics import median
from typing import Any, Iterable

__all__ = ["sensitivity_of", "summarise", "format_factor", "MEASUREMENT_KINDS", "basis_of"]

#: the kinds that compare a theorem with a measurement or a worst case (identity checks
#: compare two writings of a formula or two implementations; their ×(1 + tolerance) would
#: otherwise set the suite's median)
MEASUREMENT_KINDS = ("bound", "envelope", "inequality", "rate", "worst_case")

_RATE = re.compile(r"slope CI \[([-+0-9.eE]+), ([-+0-9.eE]+)\] vs claim slope (<=|>=|=) "
                   r"([-+0-9.eE]+)")


def _scalar(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def format_factor(f: float | None) -> str:
    """``×1.5``, ``×1200``, ``∞`` or ``n/a``."""
    if f is None:
        return "n/a"
    if math.isinf(f):
        return "∞"
    return f"×{f:.3g}"


def _bound(verdict: str, measured: Any, theoretical: Any,
           extra: dict[str, Any]) -> tuple[float | None, str]:
    m, b = _scalar(measured), _scalar(theoretical)
    if m is None or b is None:
        return None, "n/a: bound without scalar measured/bound values"
    if m <= 0 or b <= 0:
        return None, "n/a: measured or bound ≤ 0, no finite factor flips the verdict"
    if verdict == "FAILS":
        return max(m / b, 1.0), "measured/bound at the deciding point"
    if verdict != "VACUOUS":
        return max(b / m, 1.0), "bound/measured at the deciding point"
    # VACUOUS: a smaller error would make the bound look informative (a verdict change, but
    # no detection); what *detects* an error is a FAILS, so the factor is bound/measured
    grid = extra.get("grid") or {}
    bounds, trivial = grid.get("bound"), grid.get("trivial")
    if bounds is None or trivial is None:
        bounds, trivial = [b], [extra.get("trivial")]
    ratios = [bj / tj for bj, tj in zip(bounds, trivial)
              if tj is not None and tj > 0 and bj > 0]
    margin = f"; ÷{min(ratios):.3g} would make it informative" if ratios else ""
    return max(b / m, 1.0), "bound/measured at the deciding point (to FAIL)" + margin


def _envelope(verdict: str, measured: Any, theoretical: Any) -> tuple[float | None, str]:
    spread, factor = _scalar(measured), _scalar(theoretical)
    if spread is None or factor is None or spread <= 0:
        return None, "n/a: envelope without a numeric spread and factor"
    if verdict == "FAILS":
        return max(spread / factor, 1.0), ("spread/factor: shape distortion over the grid "
                                           "(a constant factor is invisible)")
    return max(factor / spread, 1.0), ("factor/spread: shape distortion over the grid "
                                       "(a constant factor is invisible)")


def _rate(verdict: str, detail: str) -> tuple[float | None, str]:
    found = _RATE.findall(detail or "")
    if not found:
        return None, "n/a: no exponent confidence interval in the detail"
    best = None
    for lo, hi, _rel, p in found:  # every claim kind flips where p crosses an end
        lo, hi, p = float(lo), float(hi), float(p)
        if p == 0:
            continue
        if lo <= p <= hi:          # inside: move p to the nearer end
            dist = min(p - lo, hi - p)
        else:                      # outside: move p into the interval
            dist = min(abs(p - lo), abs(p - hi))
        f = 1.0 + dist / abs(p)
        best = f if best is None else min(best, f)
    if best is None:
        return None, "n/a: claimed exponent 0 (no relative change defined)"
    return best, "1 + |Δp|/|p|: exponent change that crosses the slope CI"


def sensitivity_of(kind: str, verdict: str, measured: Any, theoretical: Any, *,
                   tolerance: float | None = None, detail: str = "",
                   extra: dict[str, Any] | None = None) -> tuple[float | None, str]:
    """``(factor, note)`` by the rules of the module docstring (``factor`` None = n/a)."""
    extra = dict(extra or {})
    if verdict == "ERROR":
        return None, "n/a: the check errored"
    if verdict == "NOT RUN":
        return None, "n/a: the check did not run"
    if kind == "bound":
        return _bound(verdict, measured, theoretical, extra)
    if kind == "envelope":
        return _envelope(verdict, measured, theoretical)
    if kind == "rate":
        return _rate(verdict, detail)
    if kind == "inequality":
        m, t = _scalar(measured), _scalar(theoretical)
        if m is not None and t is not None and m > 0 and t > 0:
            return (max(t / m, m / t), "theoretical/measured of the scalar inequality")
        return None, ("n/a: the inequality is checked as a margin (LHS − RHS ≤ 0) or per "
                      "sub-claim (dict); its margins are in the detail")
    if kind == "identity":
        if tolerance is None:
            return None, "n/a: identity without a stated tolerance"
        return 1.0 + float(tolerance), ("1 + tolerance (relative deviation that fails the "
                                        "identity)")
    if kind == "worst_case":
        w, b = _scalar(measured), _scalar(theoretical)
        if w is None or b is None or w <= 0 or b <= 0:
            return None, "n/a: worst case or bound ≤ 0"
        if verdict in ("FAILS", "ERRATUM"):
            return max(w / b, 1.0), "worst case/bound"
        return max(b / w, 1.0), "bound/worst case over the class (to a counterexample)"
    if kind in ("selection", "ordering"):
        return None, f"n/a: a {kind} claim is about a choice or an order, not a formula value"
    return None, f"n/a: no sensitivity rule for kind {kind!r}"


#: what the identity checks rest on (the transcriptions among them compare the code with a
#: second writing of *our own reading* of the papers, docs/formulas.md: regression checks)
READING_BASIS = ("code equals our reading (identity: the code against a second writing of "
                 "our reading, docs/formulas.md — regression checks, not the papers)")
MEASUREMENT_BASIS = "claims against measurements"
def basis_of(kind: str) -> str:
    """What a check of ``kind`` rests on: :data:`MEASUREMENT_BASIS`, ``"code equals our
    reading"`` (identity) or ``"other"`` (selection, ordering, …)."""
    if kind in MEASUREMENT_KINDS:
        return MEASUREMENT_BASIS
    return "code equals our reading" if kind == "identity" else "other"


#: verdicts whose factor says how far a check is from holding, not what it could detect
NOT_DETECTION = ("FAILS", "ERRATUM", "NOT RUN")


def summarise(items: Iterable[tuple]) -> str:
    """One line: the median factor over the checks against measurements (per kind) and,
    apart, over the identity checks (code equals our reading), and how many are n/a.
    ``items``: ``(kind, factor)`` or ``(kind, factor, verdict)`` per check; a FAILS, ERRATUM
    or NOT RUN result is left out of the medians (its factor is how far it is from holding,
    not detection power) and counted apart."""
    rows = [(t[0], t[1], t[2] if len(t) > 2 else None) for t in items]
    apart = [r for r in rows if r[2] in NOT_DETECTION]
    rows = [r for r in rows if r[2] not in NOT_DETECTION]
    have = [(k, f) for k, f, _ in rows if f is not None and math.isfinite(f)]
    na = len(rows) - len(have)
    tail = (f"; not counted: {len(apart)} FAILS/ERRATUM/NOT RUN (a factor there says how far "
            f"a check is from holding, not what it detects)" if apart else "")
    if not have:
        return f"sensitivity: n/a for every check run{tail}"
    parts = []
    measured = [(k, f) for k, f in have if k in MEASUREMENT_KINDS]
    if measured:
        kinds = sorted({k for k, _ in measured})
        per = ", ".join(f"{k} {format_factor(median(f for kk, f in measured if kk == k))}"
                        for k in kinds)
        parts.append(f"{MEASUREMENT_BASIS}: formula errors larger than "
                     f"{format_factor(median(f for _, f in measured))} flip a verdict (median "
                     f"over {len(measured)} checks; per kind: {per})")
    reading = [f for k, f in have if k == "identity"]
    if reading:
        parts.append(f"{READING_BASIS}: {format_factor(median(reading))} over "
                     f"{len(reading)} checks")
    other = [(k, f) for k, f in have if k not in MEASUREMENT_KINDS and k != "identity"]
    if other:
        kinds = sorted({k for k, _ in other})
        parts.append("other kinds: " + ", ".join(
            f"{k} {format_factor(median(f for kk, f in other if kk == k))}" for k in kinds))
    return "sensitivity — " + "; ".join(parts) + f"; n/a for {na}{tail}"
