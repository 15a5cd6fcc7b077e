"""Tests of verification/core/verdicts.py: the three-way rules, on hand-made intervals."""

import pytest

from verification.estimators.fitting import fit_loglog
from verification.core.registry import Verdict
from verification.core.verdicts import difference_three_way, outcome, rate_three_way, worst


@pytest.mark.parametrize("ci, want", [((-0.9, -0.6), Verdict.HOLDS),
                                      ((-0.6, -0.4), Verdict.INCONCLUSIVE),
                                      ((-0.45, -0.3), Verdict.FAILS),
                                      ((-0.7, -0.5), Verdict.HOLDS)])  # touching counts
def test_at_most(ci, want):
    assert rate_three_way(ci, -0.5, claim="at_most")[0] is want


@pytest.mark.parametrize("ci, want", [((1.2, 2.0), Verdict.HOLDS),
                                      ((0.8, 1.1), Verdict.INCONCLUSIVE),
                                      ((0.1, 0.9), Verdict.FAILS)])
def test_at_least(ci, want):
    assert rate_three_way(ci, 1.0, claim="at_least")[0] is want


def test_equal_needs_narrow_interval():
    assert rate_three_way((-2.1, -1.9), -2.0, claim="equal", resolution=0.3)[0] is Verdict.HOLDS
    assert rate_three_way((-3.0, -1.0), -2.0, claim="equal", resolution=0.3)[0] \
        is Verdict.INCONCLUSIVE
    assert rate_three_way((-1.9, -1.8), -2.0, claim="equal", resolution=0.3)[0] is Verdict.FAILS
    with pytest.raises(ValueError, match="resolution"):
        rate_three_way((-2.1, -1.9), -2.0, claim="equal")


def test_accepts_slope_fit_and_rejects_bad_input():
    fit = fit_loglog([1, 2, 4, 8], [[1, 0.5, 0.25, 0.125], [1, 0.49, 0.26, 0.12]])
    assert rate_three_way(fit, -0.5, claim="at_most")[0] is Verdict.HOLDS
    with pytest.raises(ValueError, match="claim"):
        rate_three_way((0, 1), 0.5, claim="bigger")
    with pytest.raises(ValueError):
        rate_three_way((1.0, 0.0), 0.5, claim="at_most")


def test_difference_and_worst_and_outcome():
    assert difference_three_way(0.05, 0.01) is Verdict.HOLDS
    assert difference_three_way(0.01, 0.01) is Verdict.INCONCLUSIVE
    assert difference_three_way(-0.05, 0.01) is Verdict.FAILS
    with pytest.raises(ValueError):
        difference_three_way(0.1, -1.0)
    assert worst([Verdict.HOLDS, Verdict.INCONCLUSIVE]) is Verdict.INCONCLUSIVE
    assert worst([Verdict.ERRATUM, Verdict.FAILS]) is Verdict.FAILS
    assert outcome(Verdict.HOLDS, measured=1, theoretical=1).holds is True
    o = outcome(Verdict.INCONCLUSIVE, measured=1, theoretical=1)
    assert o.verdict is Verdict.INCONCLUSIVE and o.holds is False
