"""Three-way verdicts for measured claims: HOLDS, FAILS or INCONCLUSIVE.

A check that fits an exponent or compares two noisy accuracies must be able to say "this
size cannot decide". The rules (no slack beyond the confidence interval itself):

* one-sided rate claim ``slope <= predicted`` (an upper bound's exponent): HOLDS when the
  whole interval lies at or below ``predicted``, FAILS when it lies wholly above,
  INCONCLUSIVE when it straddles; ``slope >= predicted`` mirrored;
* two-sided rate claim ``slope = predicted``: FAILS when the interval excludes
  ``predicted``; HOLDS when it contains it and is narrower than ``resolution`` (so that a
  wide interval cannot "confirm" anything); INCONCLUSIVE otherwise;
* ordering ``a > b`` of two estimates with standard error ``se`` of the difference: HOLDS
  when ``a − b > z·se``, FAILS when ``a − b < −z·se``, INCONCLUSIVE in between.
"""

from __future__ import annotations

import math
from typing import Sequence

from verification.estimators.fitting import SlopeFit
from verification.core.registry import Outcome, Verdict

__all__ = ["rate_three_way", "difference_three_way", "outcome", "worst"]


def _interval(fit: SlopeFit | Sequence[float]) -> tuple[float, float]:
    lo, hi = (fit.ci_low, fit.ci_high) if isinstance(fit, SlopeFit) else map(float, fit)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"fit must give a finite interval low <= high, got ({lo}, {hi})")
    return float(lo), float(hi)


def rate_three_way(fit: SlopeFit | Sequence[float], predicted: float, *, claim: str,
                   resolution: float | None = None) -> tuple[Verdict, str]:
    """Verdict of an exponent claim from a slope confidence interval (rules above).

    ``claim``: ``"at_most"``, ``"at_least"`` or ``"equal"``; ``resolution`` (required for
    ``"equal"``): the widest interval that may confirm an equality."""
    lo, hi = _interval(fit)
    predicted = float(predicted)
    if claim == "at_most":
        v = Verdict.HOLDS if hi <= predicted else Verdict.FAILS if lo > predicted \
            else Verdict.INCONCLUSIVE
        rel = "<="
    elif claim == "at_least":
        v = Verdict.HOLDS if lo >= predicted else Verdict.FAILS if hi < predicted \
            else Verdict.INCONCLUSIVE
        rel = ">="
    elif claim == "equal":
        if resolution is None or not resolution > 0:
            raise ValueError(f"an 'equal' claim needs a resolution > 0, got {resolution!r}")
        if not lo <= predicted <= hi:
            v = Verdict.FAILS
        else:
            v = Verdict.HOLDS if hi - lo <= resolution else Verdict.INCONCLUSIVE
        rel = "="
    else:
        raise ValueError(f"claim must be 'at_most', 'at_least' or 'equal', got {claim!r}")
    extra = f", width {hi - lo:.3g} vs resolution {resolution:g}" if claim == "equal" else ""
    return v, f"slope CI [{lo:.4g}, {hi:.4g}] vs claim slope {rel} {predicted:.4g}{extra}: {v.value}"


def difference_three_way(diff: float, se: float, *, z: float = 2.0) -> Verdict:
    """Verdict of the claim ``diff > 0`` given the standard error ``se`` of ``diff``."""
    if not (math.isfinite(diff) and math.isfinite(se)) or se < 0:
        raise ValueError(f"need a finite diff and se >= 0, got diff={diff!r}, se={se!r}")
    if diff > z * se:
        return Verdict.HOLDS
    if diff < -z * se:
        return Verdict.FAILS
    return Verdict.INCONCLUSIVE


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The worst of several sub-verdicts (FAILS > ERRATUM > INCONCLUSIVE > VACUOUS > HOLDS)."""
    order = (Verdict.FAILS, Verdict.ERRATUM, Verdict.INCONCLUSIVE, Verdict.NOT_RUN,
             Verdict.VACUOUS, Verdict.HOLDS)
    for v in order:
        if v in verdicts:
            return v
    raise ValueError(f"no verdict among {verdicts!r}")


def outcome(verdict: Verdict, **kw) -> Outcome:
    """An :class:`Outcome` carrying ``verdict`` (HOLDS/FAILS through ``holds``, the others
    explicitly, as :func:`verification.core.registry.run_check` expects)."""
    if verdict in (Verdict.HOLDS, Verdict.FAILS):
        return Outcome(holds=verdict is Verdict.HOLDS, **kw)
    return Outcome(holds=False, verdict=verdict, **kw)
