"""Verdict rules of worst_case checks: a loose bound holds; only exceedances fail."""

from __future__ import annotations

import math

import pytest

from verification.core.registry import Verdict
from verification.worst_case.outcome import worst_case_outcome


def _v(out):
    return out.verdict or (Verdict.HOLDS if out.holds else Verdict.FAILS)


def test_loose_bound_holds_with_its_looseness():
    out = worst_case_outcome(measured=0.1, worst=1.0, bound=16.0, exact=True, rel_tol=1e-6)
    assert _v(out) is Verdict.HOLDS
    assert out.tightness == pytest.approx(16.0)
    assert out.extra["easiness"] == pytest.approx(10.0)


def test_exact_worst_case_above_bound_is_a_counterexample():
    out = worst_case_outcome(measured=0.1, worst=2.0, bound=1.0, exact=True, rel_tol=1e-6)
    assert _v(out) is Verdict.FAILS and "counterexample" in out.detail


def test_valid_upper_bound_above_bound_is_undecided():
    out = worst_case_outcome(measured=0.1, worst=2.0, bound=1.0, exact=False, rel_tol=1e-6)
    assert _v(out) is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("measured,worst", [(1.5, 2.0), (1.0 + 1e-3, 1.0)])
def test_measured_above_bound_or_worst_fails(measured, worst):
    out = worst_case_outcome(measured=measured, worst=worst, bound=1.2, exact=False,
                             rel_tol=1e-6)
    assert _v(out) is Verdict.FAILS


def test_non_finite_values_are_rejected():
    with pytest.raises(ValueError):
        worst_case_outcome(measured=math.nan, worst=1.0, bound=1.0, exact=True, rel_tol=0)


def test_zero_measurement_gives_a_null_ratio_not_an_infinity():
    out = worst_case_outcome(measured=0.0, worst=1.0, bound=2.0, exact=True, rel_tol=1e-6)
    assert out.extra["easiness"] is None and out.extra["looseness"] == 2.0


def test_needs_pep_turns_a_missing_pepit_into_not_run_with_the_hint():
    from verification.core.registry import Context, Verdict
    from verification.worst_case.outcome import needs_pep
    from verification.worst_case.pep import INSTALL_HINT, PEPUnavailable

    @needs_pep
    def chk(ctx):
        """doc"""
        raise PEPUnavailable(INSTALL_HINT)

    out = chk(Context(size="quick", seed=0, params={}, tolerance=None))
    assert out.verdict is Verdict.NOT_RUN and INSTALL_HINT in out.detail
    assert out.extra["not_run_reason"] == INSTALL_HINT
    assert chk.__doc__ == "doc" and chk.__name__ == "chk"
