"""The registry's verdict vocabulary and the two numerical-bound kinds."""

from __future__ import annotations

import math

import pytest

from verification.core import registry
from verification.core.registry import (Check, Outcome, Result, Verdict, bound_outcome,
                                   envelope_outcome, run_check)
from verification.core.suite import aggregate


def _check(kind: str, fn) -> Check:
    return Check(id=f"test.{kind}", paper="P", reference="Thm", kind=kind, fn=fn,
                 tolerance=None, tolerance_reason="")


def test_bound_outcome_holds_fails_tightness_and_vacuous():
    ok = bound_outcome(0.5, 2.0, trivial=1.0)
    assert ok.holds and ok.tightness == pytest.approx(4.0) and ok.vacuous is True
    assert "VACUOUS" in ok.detail
    useful = bound_outcome(0.5, 0.8, trivial=1.0)
    assert useful.holds and useful.vacuous is False
    # inflating the measurement past the bound turns the verdict
    bad = bound_outcome(2.5, 2.0)
    assert not bad.holds and bad.tightness == pytest.approx(0.8) and bad.vacuous is None
    assert bound_outcome(0.0, 1.0).tightness == math.inf
    with pytest.raises(ValueError):
        bound_outcome(float("nan"), 1.0)


def test_envelope_outcome_spread_and_constant():
    shape = [1.0, 0.1, 0.01]
    good = envelope_outcome([2.0, 0.21, 0.019], shape, factor=1.5)
    assert good.holds and good.extra["C"] == pytest.approx(2.1)
    # one-sided (upper bound): second half's largest ratio over the first half's constant
    # (ratios 2.0, 2.1 | 1.9: C = 2.1 on the first two points, the last is 1.9/2.1 of it)
    assert good.measured == pytest.approx(1.9 / 2.1)
    assert envelope_outcome([2.0, 0.21, 0.019], shape, factor=1.5,
                            claim="exact").measured == pytest.approx(2.1 / 1.9)
    # a measurement with another rate (1/T instead of 1/T^2 shape) leaves the envelope
    # (ratios 1, 10 | 100: the last point rises 10x above the first half's constant)
    bad = envelope_outcome([1.0, 0.1, 0.01], [1.0, 0.01, 0.0001], factor=5.0)
    assert not bad.holds and bad.measured == pytest.approx(10.0)
    with pytest.raises(ValueError):
        envelope_outcome([1.0], [1.0], factor=2.0)
    with pytest.raises(ValueError):
        envelope_outcome([1.0, -1.0], [1.0, 1.0], factor=2.0)


def test_run_check_explicit_verdicts_and_numeric_bound_results():
    erratum = run_check(_check("identity", lambda ctx: Outcome(
        1.0, 0.0, holds=False, verdict=Verdict.ERRATUM)))
    assert erratum.verdict is Verdict.ERRATUM
    inconclusive = run_check(_check("rate", lambda ctx: Outcome(
        1.0, 0.0, holds=True, verdict=Verdict.INCONCLUSIVE)))
    assert inconclusive.verdict is Verdict.INCONCLUSIVE
    # a bound check must carry numbers; a non-numeric measurement is the check's ERROR
    broken = run_check(_check("bound", lambda ctx: Outcome("many", 1.0, holds=True,
                                                           tightness=1.0)))
    assert broken.verdict is Verdict.ERROR and "numeric" in broken.detail
    res = run_check(_check("bound", lambda ctx: bound_outcome(1.0, 3.0, trivial=10.0)))
    d = res.to_dict()
    assert res.verdict is Verdict.HOLDS
    assert d["tightness"] == pytest.approx(3.0) and d["vacuous"] is False
    assert d["measured"] == 1.0 and d["theoretical"] == 3.0


def test_aggregate_takes_the_worst_verdict():
    chk = _check("identity", lambda ctx: None)

    def res(v: Verdict) -> Result:
        return Result(chk, v, None, None, "", 0.0, 0, "quick")

    assert aggregate([res(Verdict.HOLDS), res(Verdict.INCONCLUSIVE)]) is Verdict.INCONCLUSIVE
    assert aggregate([res(Verdict.ERRATUM), res(Verdict.INCONCLUSIVE)]) is Verdict.ERRATUM
    assert aggregate([res(Verdict.ERRATUM), res(Verdict.FAILS)]) is Verdict.FAILS
    assert aggregate([res(Verdict.FAILS), res(Verdict.ERROR)]) is Verdict.ERROR
    assert aggregate([res(Verdict.HOLDS)] * 3) is Verdict.HOLDS
    with pytest.raises(ValueError):
        aggregate([])


def test_kinds_include_bound_and_envelope():
    assert {"bound", "envelope"} <= set(registry.KINDS)
