"""The envelope rules (verification/core/envelope.py): each rule flips both ways."""

from __future__ import annotations

import numpy as np
import pytest

from verification.core.envelope import (FLAT_SLOPE, envelope_rule, rate_gap_text,
                                        slope_gap_interval)
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


# ---------------------------------------------------------------- power (issue 41)
GRID4 = np.array([20.0, 60.0, 200.0, 640.0])  # 4 points, 1.5 decades: the audit's grid


def test_planted_slower_decay_fails_where_the_rise_rule_alone_held():
    # n^-0.55 against a bound of order n^-1: the rise rule alone gives 2.90 <= 3 ...
    v, stat, line, info = envelope_rule(GRID4 ** -0.55, GRID4 ** -1.0, factor=3.0, grid=GRID4,
                                        name="n")
    assert stat == pytest.approx((640 / 60) ** 0.45) and stat < 3.0
    # ... the slope gap 0.45 > tolerance 0.15 with a zero-width interval: FAILS
    assert v == "FAILS" and info["slope_gap"] == pytest.approx(0.45)
    assert "resolution" in line and "decays slower than the bound beyond" in line
    # the right rate (or a faster one) on the same grid still HOLDS
    assert envelope_rule(GRID4 ** -1.0, GRID4 ** -1.0 * 1.0001, factor=3.0, grid=GRID4)[0] \
        in ("HOLDS", "INCONCLUSIVE")
    assert envelope_rule(GRID4 ** -1.1, GRID4 ** -1.0, factor=3.0, grid=GRID4)[0] == "HOLDS"


def test_hidden_tail_behind_a_high_first_point_fails():
    # measured n^-0.2 with its first point 3x high against n^-1/2: the whole-grid slope gap
    # is ~0 (the high point tilts it) and the rise 0.94 — the tail's slope gap is 0.3
    m = GRID4 ** -0.2
    m[0] *= 3.0
    v, stat, line, info = envelope_rule(m, GRID4 ** -0.5, factor=3.0, grid=GRID4, name="n")
    assert stat < 3.0 and abs(info["slope_gap"]) < 0.05
    assert v == "FAILS" and info["tail_slope_gap"] == pytest.approx(0.3)
    assert "over the last 3 points alone" in line
    # the same first point in front of a tail at the bound's rate: not refuted
    ok = GRID4 ** -0.5
    ok[0] *= 3.0
    assert envelope_rule(ok, GRID4 ** -0.5, factor=3.0, grid=GRID4)[0] != "FAILS"


def test_too_short_or_too_noisy_grid_is_inconclusive_with_its_resolution():
    z = np.random.default_rng(1).standard_normal((4, 4))  # 4 seeds, log-noise sd 0.6
    x = np.array([10.0, 20.0, 40.0, 80.0])  # 0.9 decade: wide seed-to-seed interval
    v, _, line, info = envelope_rule(x ** -1.0 * np.exp(0.6 * z), x ** -1.0, factor=3.0,
                                     grid=x, name="n")
    assert info["resolution"] >= 0.5 and v == "INCONCLUSIVE"
    assert "too short to tell" in line and "seed-to-seed over 4 seeds" in line
    # the same noise over 3 decades resolves the rate: HOLDS
    w = np.array([10.0, 100.0, 1000.0, 10000.0])
    v2, _, _, info2 = envelope_rule(w ** -1.0 * np.exp(0.6 * z), w ** -1.0, factor=3.0, grid=w)
    assert v2 == "HOLDS" and info2["resolution"] < 0.5


def test_slope_gap_interval_seed_to_seed_and_from_residuals():
    x = np.array([1.0, 10.0, 100.0])
    gap, hw, how = slope_gap_interval(x, [[1.0, 10.0, 100.0], [1.0, 10.0, 100.0]])
    assert gap == pytest.approx(1.0) and hw == pytest.approx(0.0) and "2 seeds" in how
    gap, hw, how = slope_gap_interval(x, [1.0, 20.0, 100.0])  # one seed, curved: residual CI
    assert hw > 0 and "residuals" in how
    gap, hw, how = slope_gap_interval(x[:2], [1.0, 10.0])
    assert hw == float("inf")


def test_theta_claim_slope_test_fails_both_ways():
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    # spread 1000^0.16 = 3.0 passes the band 3.05, but the slopes differ by 0.16 > 0.15 exactly
    v, stat, _, _ = envelope_rule(x ** 1.16, x, factor=3.05, claim="exact", grid=x)
    assert stat < 3.05 and v == "FAILS"
    assert envelope_rule(x ** 0.84, x, factor=3.05, claim="exact", grid=x)[0] == "FAILS"
    assert envelope_rule(x ** 1.05, x, factor=3.05, claim="exact", grid=x)[0] == "HOLDS"
