"""VACUOUS verdicts, the sensitivity of every kind (verification/core/sensitivity.py) and
the ERRATUM basis, through :func:`verification.core.registry.run_check`."""

from __future__ import annotations

import pytest

from verification.core.bound_grid import grid_bound_outcome
from verification.core.registry import (ERRATUM_BASES, Check, Outcome, Verdict,
                                        bound_outcome, envelope_outcome, run_check)
from verification.core.report import sensitivity_line
from verification.core.sensitivity import sensitivity_of, summarise
from verification.core.suite import CheckRun, SuiteRun


def _check(kind: str, fn, tolerance=None) -> Check:
    return Check(id=f"test.{kind}", paper="P", reference="Thm", kind=kind, fn=fn,
                 tolerance=tolerance, tolerance_reason="t" if tolerance is not None else "")


def test_bound_below_its_trivial_bound_is_not_vacuous_one_above_is():
    below = run_check(_check("bound", lambda ctx: grid_bound_outcome(
        "n", [1, 10], [0.1, 0.05], [0.5, 0.2], trivial=1.0)))
    assert below.verdict is Verdict.HOLDS and below.vacuous is False
    above = run_check(_check("bound", lambda ctx: grid_bound_outcome(
        "n", [1, 10], [0.1, 0.05], [5.0, 2.0], trivial=1.0)))
    assert above.verdict is Verdict.VACUOUS and above.trivial == 1.0
    # above at one point only: informative somewhere, so it HOLDS
    mixed = run_check(_check("bound", lambda ctx: grid_bound_outcome(
        "n", [1, 10], [0.1, 0.05], [5.0, 0.2], trivial=1.0)))
    assert mixed.verdict is Verdict.HOLDS
    # a vacuous bound that is violated is a FAILS, not VACUOUS
    violated = run_check(_check("bound", lambda ctx: grid_bound_outcome(
        "n", [1, 10], [3.0, 0.05], [2.0, 2.0], trivial=1.0)))
    assert violated.verdict is Verdict.FAILS
    assert above.to_dict()["trivial"] == 1.0 and above.to_dict()["verdict"] == "VACUOUS"


def test_vacuous_is_not_counted_as_holds_and_aggregates_below_inconclusive():
    res = run_check(_check("bound", lambda ctx: bound_outcome(0.1, 3.0, trivial=1.0)))
    suite = SuiteRun((CheckRun(res.check, res.verdict, (res,)),), "quick", (0,))
    assert suite.counts()["HOLDS"] == 0 and suite.counts()["VACUOUS"] == 1


def test_bound_sensitivity_is_the_tightness_or_the_vacuity_margin():
    res = run_check(_check("bound", lambda ctx: bound_outcome(0.5, 2.0)))
    assert res.sensitivity == pytest.approx(4.0)
    fails = run_check(_check("bound", lambda ctx: bound_outcome(3.0, 2.0)))
    assert fails.sensitivity == pytest.approx(1.5)
    # VACUOUS: ÷3 makes it look informative (no detection); ÷30 makes it FAIL
    vac = run_check(_check("bound", lambda ctx: bound_outcome(0.1, 3.0, trivial=1.0)))
    assert vac.verdict is Verdict.VACUOUS and vac.sensitivity == pytest.approx(30.0)
    assert "÷3 would make it informative" in vac.sensitivity_note
    # the factor really flips the verdict: a bound divided by slightly more fails
    f = res.sensitivity * 1.01
    assert not bound_outcome(0.5, 2.0 / f).holds
    assert bound_outcome(0.5, 2.0 / (0.99 * res.sensitivity)).holds


def test_envelope_identity_rate_and_na_sensitivities():
    env = run_check(_check("envelope", lambda ctx: envelope_outcome(
        [1.0, 0.1, 0.012], [1.0, 0.1, 0.01], factor=2.0)))
    assert env.sensitivity == pytest.approx(2.0 / 1.2)
    ident = run_check(_check("identity", lambda ctx: Outcome(1e-15, 0.0, holds=True),
                             tolerance=1e-9))
    assert ident.sensitivity == pytest.approx(1 + 1e-9)
    rate = run_check(_check("rate", lambda ctx: Outcome(
        -0.7, -0.5, holds=True, detail="slope CI [-0.75, -0.6] vs claim slope <= -0.5: HOLDS")))
    assert rate.sensitivity == pytest.approx(1.2)  # p must move 0.1 = 20 % to reach -0.6
    sel = run_check(_check("selection", lambda ctx: Outcome(3, 3, holds=True)))
    assert sel.sensitivity is None and sel.sensitivity_note.startswith("n/a:")
    assert sensitivity_of("rate", "HOLDS", 0, 0, detail="no interval")[0] is None


def test_summary_line_reports_median_and_per_kind():
    line = summarise([("bound", 4.0), ("bound", 100.0), ("envelope", 2.0), ("ordering", None)])
    assert "×4" in line and "bound ×52" in line and "envelope ×2" in line and "n/a for 1" in line
    res = run_check(_check("bound", lambda ctx: bound_outcome(0.5, 2.0)))
    suite = SuiteRun((CheckRun(res.check, res.verdict, (res,)),), "quick", (0,))
    assert sensitivity_line(suite).startswith(
        "sensitivity — claims against measurements: formula errors larger than ×4 flip")


def test_erratum_basis_is_recorded_and_validated():
    ok = run_check(_check("identity", lambda ctx: Outcome(
        1.0, 0.0, holds=False, verdict=Verdict.ERRATUM, erratum_basis="algebra")))
    assert ok.verdict is Verdict.ERRATUM and ok.to_dict()["erratum_basis"] == "algebra"
    assert "unproven" in ERRATUM_BASES["algebra"]
    bad = run_check(_check("identity", lambda ctx: Outcome(
        1.0, 0.0, holds=False, verdict=Verdict.ERRATUM, erratum_basis="vibes")))
    assert bad.verdict is Verdict.ERROR


def test_report_shows_vacuous_section_trivial_bound_sensitivity_and_erratum_basis():
    from verification.core.report import format_table, report_markdown

    vac = run_check(_check("bound", lambda ctx: bound_outcome(0.1, 3.0, trivial=1.0)))
    err = run_check(Check(id="test.erratum", paper="P", reference="Cor 1", kind="rate",
                          fn=lambda ctx: Outcome(1.0, 0.0, holds=False,
                                                 verdict=Verdict.ERRATUM,
                                                 erratum_basis="algebra"),
                          tolerance=None, tolerance_reason=""))
    suite = SuiteRun((CheckRun(vac.check, vac.verdict, (vac,)),
                      CheckRun(err.check, err.verdict, (err,))), "quick", (0,))
    md = report_markdown(suite)
    assert "## VACUOUS (1)" in md and "- **Trivial bound:** 1" in md
    assert "- **Sensitivity:** ×30" in md
    assert "- **Erratum basis:** inconsistent as printed; our correction makes it " \
           "consistent (algebra, correction unproven)" in md
    assert "0 HOLD" in md and "1 VACUOUS" in md
    table = format_table(suite)
    assert "×30" in table and "claims against measurements" in table


def test_worst_case_sensitivity_is_the_theorems_looseness_over_the_class():
    f, note = sensitivity_of("worst_case", "HOLDS", 6.88, 27.19)
    assert f == pytest.approx(27.19 / 6.88) and "counterexample" in note
    f, _ = sensitivity_of("worst_case", "FAILS", 2.0, 1.0)
    assert f == 2.0
    assert sensitivity_of("worst_case", "HOLDS", 0.0, 1.0)[0] is None


def test_summary_line_splits_our_reading_from_measurements():
    line = summarise([("identity", 1.0), ("identity", 1.0), ("identity", 1.0),
                      ("bound", 20.0), ("envelope", 2.0)])
    assert "claims against measurements: formula errors larger than ×11 flip a verdict " \
           "(median over 2 checks" in line
    assert "code equals our reading (identity" in line and ": ×1 over 3 checks" in line
    # the identity checks no longer set an overall median
    assert "×1 (median" not in line
    assert "our reading" not in summarise([("bound", 4.0)])


def test_summary_line_leaves_fails_out_of_detection_power():
    # a FAILS' factor (measured/bound 8e20) is a distance from holding, not detection power
    line = summarise([("identity", 1.0e-9 + 1, "FAILS"), ("bound", 8.08e20, "FAILS"),
                      ("bound", 3.0, "HOLDS")])
    assert "e+20" not in line and "×3" in line
    assert "not counted: 2 FAILS/ERRATUM/NOT RUN" in line
    only = summarise([("identity", 8.08e20, "FAILS")])
    assert only.startswith("sensitivity: n/a for every check run") and "e+20" not in only
    # the same item without its verdict would count (the old behaviour): the rule decides
    assert "e+20" in summarise([("bound", 8.08e20)])
