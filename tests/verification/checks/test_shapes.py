"""Shape checks of the vacuous bounds (verification/checks/shapes.py): each spans >= 1.5
decades, reports slopes, and a formula error in the bound's dependence flips the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from pfl_theory import ppfe
from verification.checks import bounds_ppfe_linear as lin
from verification.checks import shapes as S
from verification.core.registry import Context, Verdict, load_all, run_check


def _ctx(check_id: str) -> Context:
    chk = load_all()[check_id]
    return Context(size="quick", seed=0, params=dict(chk.quick), tolerance=chk.tolerance)


def test_shape_envelope_one_sided_for_upper_bounds_and_slopes():
    n = np.array([10.0, 100.0, 1000.0])
    ok = S._shape("n", n, 2.0 / np.sqrt(n), 1.0 / np.sqrt(n))
    assert ok.holds and ok.extra["slope_measured"] == pytest.approx(-0.5)
    # an extra √ in the bound (1/n instead of 1/√n): the measurement decays slower: FAILS
    bad = S._shape("n", n, 2.0 / np.sqrt(n), 1.0 / n)
    assert not bad.holds and "decays slower than the bound in n by 0.50" in bad.detail
    # the measurement decaying faster than the bound respects it: HOLDS with the gap named
    loose = S._shape("n", n, 2.0 / n, 1.0 / np.sqrt(n))
    assert loose.holds and "looser in n by 0.50" in loose.detail
    assert not S._shape("n", n, 2.0 / n, 1.0 / np.sqrt(n), claim="exact").holds
    with pytest.raises(ValueError):
        S._shape("n", [10.0, 100.0], [1.0, 1.0], [1.0, 1.0])  # 1 decade only
    zero = S._shape("n", n, [1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    assert zero.verdict is Verdict.INCONCLUSIVE


def test_decided_runs_several_seeds_and_the_interval_is_seed_to_seed():
    n = np.array([10.0, 100.0, 1000.0, 10000.0])
    seen = []

    def measure(seed):
        seen.append(seed)
        wobble = 1.0 + 0.05 * seed  # seed-to-seed noise in the last point only
        return n, n ** -1.0 * np.array([1, 1, 1, wobble]), n ** -0.5, "d"
    ctx = Context(size="quick", seed=0, params={"seeds": 3}, tolerance=3.0)
    out = S._decided(ctx, "n", measure)
    assert seen == [0, 1, 2] and out.holds and "seed-to-seed over 3 seeds" in out.detail
    assert "resolution" in out.detail and out.extra["seeds"] == 3
    seen.clear()
    slower = S._decided(ctx, "n", lambda s: (n, n ** -0.3 * (1 + 0.01 * s), n ** -1.0, "d"))
    assert not slower.holds and slower.verdict is None  # FAILS: 0.7 slower, beyond the noise


def test_term4_linear_shape_holds_and_a_squared_input_scale_fails(monkeypatch):
    ctx = _ctx("plgu.shape_term4_linear_B")
    assert S.term4_linear_B(ctx).holds  # R̂ ∝ B, the reading ∝ B
    original = S.bounds_plgu._term4
    monkeypatch.setattr(S.bounds_plgu, "_term4",
                        lambda p, b, reading: original(p, b, reading) * b)  # B² instead of B
    assert not S.term4_linear_B(ctx).holds


def test_theorem7_shape_reports_the_rate_gap_and_a_missing_root_changes_it(monkeypatch):
    ctx = _ctx("ppfe.shape_theorem7_n")
    out = S.theorem7_n(ctx)
    assert np.max(out.extra["n"]) / np.min(out.extra["n"]) >= 10 ** 1.5
    # the excess risk of least squares decays like 1/n, the bound like 1/√n: an upper bound
    # that is looser in n, HOLDS (it FAILED under the two-sided rule before issue 33)
    assert out.holds and out.extra["slope_measured"] < -0.9 and "looser in n" in out.detail
    assert out.extra["slope_bound"] == pytest.approx(-0.5, abs=0.1)
    original = ppfe.theorem7_terms

    def too_fast(*a, **k):  # every term to the 4th power: the bound ∝ 1/n², faster than 1/n
        t = original(*a, **k)
        return {key: v ** 4 for key, v in t.items()}

    monkeypatch.setattr(lin.ppfe, "theorem7_terms", too_fast)
    lin._linear_ppfe.cache_clear()
    try:
        assert run_check(load_all()["ppfe.shape_theorem7_n"], size="quick").verdict \
            is Verdict.FAILS
    finally:
        lin._linear_ppfe.cache_clear()


def test_moved_grids_exercise_their_variable_and_can_fail(monkeypatch):
    from pfl_theory import ppfe_bounds

    cor = S.corollary2_N(_ctx("ppfe.shape_corollary2_N"))
    assert cor.holds and cor.extra["slope_measured"] < -0.5 and cor.extra["slope_bound"] < -0.4
    original = ppfe_bounds.corollary2_terms

    def shared_falls_as_n_cubed(**k):  # the N-terms ∝ N^-2 instead of N^-1/2: FAILS
        t = dict(original(**k))
        t["shared"] *= k["num_clients"] ** -1.5
        t["confidence"] *= k["num_clients"] ** -1.5
        return t

    monkeypatch.setattr(ppfe_bounds, "corollary2_terms", shared_falls_as_n_cubed)
    assert not S.corollary2_N(_ctx("ppfe.shape_corollary2_N")).holds


def test_thm42_m_moved_to_a_grid_where_m_moves():
    out = S.thm42_m(_ctx("cgpfl.shape_thm42_m"))
    assert out.holds and out.extra["slope_measured"] < -0.5 and out.extra["slope_bound"] < -0.3


def test_thm41_T_plateau_is_inconclusive_and_a_bound_below_it_fails(monkeypatch):
    ctx = _ctx("cgpfl.shape_thm41_T")
    assert S.thm41_T(ctx).verdict is Verdict.INCONCLUSIVE  # flat, 57x below the bound
    original = S.bounds_cgpfl.th.theorem41_stepwise
    monkeypatch.setattr(S.bounds_cgpfl.th, "theorem41_stepwise",
                        lambda **k: original(**k) / 1000.0)  # now below the measurement
    failed = S.thm41_T(ctx)
    assert failed.verdict is None and not failed.holds  # FAILS
