"""The envelope rules (verification/core/envelope.py): each rule flips both ways."""

from __future__ import annotations

import numpy as np
import pytest

from verification.core.envelope import FLAT_SLOPE, envelope_rule, rate_gap_text
from verification.core.registry import Verdict, envelope_outcome

N = np.array([10.0, 30.0, 100.0, 300.0, 1000.0])


def test_upper_bound_holds_when_measured_decays_faster_and_names_the_gap():
    v, stat, line, info = envelope_rule(N ** -1.0, N ** -0.5, factor=3.0, grid=N, name="n")
    assert v == "HOLDS" and stat < 1.0
    assert "bound n^-0.50, measured n^-1.00: looser in n by 0.50" in line
    # the same pair under a Θ claim is refuted: the two-sided spread is 10^(0.5·2) = 10
    v2, spread, _, _ = envelope_rule(N ** -1.0, N ** -0.5, factor=3.0, claim="exact", grid=N)
    assert v2 == "FAILS" and spread == pytest.approx(10.0)


def test_upper_bound_fails_when_measured_decays_slower():
    v, stat, line, _ = envelope_rule(N ** -0.5, N ** -1.0, factor=3.0, grid=N, name="n")
    assert v == "FAILS" and stat > 3.0 and "decays slower than the bound in n by 0.50" in line
    # the mirror pair HOLDS: only the direction of the gap decides
    assert envelope_rule(N ** -1.0, N ** -0.5, factor=3.0, grid=N)[0] == "HOLDS"


def test_constant_fitted_on_first_half_second_half_may_rise_at_most_factor():
    shape = N ** -0.5
    base = 2.0 * shape
    up = base.copy()
    up[-1] *= 2.9  # within the band: HOLDS
    assert envelope_rule(up, shape, factor=3.0)[0] == "HOLDS"
    up[-1] *= 1.1 / 2.9 * 3.0  # 3.3 x the fitted constant: FAILS
    assert envelope_rule(up, shape, factor=3.0)[0] == "FAILS"
    down = base.copy()
    down[-1] /= 1000.0  # falling out of the envelope downwards is fine for an upper bound
    assert envelope_rule(down, shape, factor=3.0)[0] == "HOLDS"
    assert envelope_rule(down, shape, factor=3.0, claim="exact")[0] == "FAILS"


def test_flat_grid_is_inconclusive_and_moving_one_side_decides():
    flat = np.ones_like(N)
    v, _, line, _ = envelope_rule(flat, flat * 2, factor=3.0, grid=N, name="m")
    assert v == "INCONCLUSIVE" and "does not exercise the scaling" in line
    # one side moving just beyond the flat threshold decides again
    moving = N ** -(FLAT_SLOPE + 0.02)
    assert envelope_rule(moving, flat, factor=3.0, grid=N)[0] == "HOLDS"
    # without the grid no slope is known: the rule cannot call it flat
    assert envelope_rule(flat, flat * 2, factor=3.0)[0] == "HOLDS"


def test_plateau_below_an_explicit_bound_is_inconclusive_not_fails():
    t = np.array([8.0, 16, 32, 64, 128, 256])
    meas, bound = np.full(6, 8.0), 13000.0 / t  # flat, 57x below at the last T
    kw = dict(factor=3.0, grid=t, name="T")
    assert envelope_rule(meas, bound, explicit=True, **kw)[0] == "INCONCLUSIVE"
    assert envelope_rule(meas, bound, explicit=False, **kw)[0] == "FAILS"  # hidden constant
    # above the bound at one point: the theorem's own constants are exceeded: FAILS
    assert envelope_rule(meas, 30.0 / t, explicit=True, **kw)[0] == "FAILS"
    # not flat (decays, but slower than 1/T): FAILS
    assert envelope_rule(8.0 * t ** -0.3, bound, explicit=True, **kw)[0] == "FAILS"


def test_envelope_outcome_carries_the_rule_and_rejects_bad_input():
    out = envelope_outcome(N ** -1.0, N ** -0.5, factor=3.0, grid=N, name="n")
    assert out.holds and out.extra["claim"] == "upper" and out.tightness == 3.0 / out.measured
    inc = envelope_outcome(np.ones(5), np.ones(5), factor=3.0, grid=N)
    assert inc.verdict is Verdict.INCONCLUSIVE
    with pytest.raises(ValueError, match="claim"):
        envelope_rule(N, N, factor=3.0, claim="lower")
    with pytest.raises(ValueError, match="grid"):
        envelope_rule(N, N, factor=3.0, grid=N[:3])
    with pytest.raises(ValueError, match="factor"):
        envelope_rule(N, N, factor=0.5)


def test_rate_gap_text_directions():
    assert "grows faster than the bound in B by 1.00" in rate_gap_text("B", 2.0, 1.0)
    assert "same rate" in rate_gap_text("B", 1.01, 1.0)
