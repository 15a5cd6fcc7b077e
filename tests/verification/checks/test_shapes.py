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


def test_shape_envelope_two_sided_band_and_slopes():
    n = np.array([10.0, 100.0, 1000.0])
    ok = S._shape("n", n, 2.0 / np.sqrt(n), 1.0 / np.sqrt(n))
    assert ok.holds and ok.extra["slope_measured"] == pytest.approx(-0.5)
    # a missing √ in the bound (1/n instead of 1/√n) moves the ratio by 10 over 2 decades
    bad = S._shape("n", n, 2.0 / np.sqrt(n), 1.0 / n)
    assert not bad.holds and "exponent gap +0.50" in bad.detail
    with pytest.raises(ValueError):
        S._shape("n", [10.0, 100.0], [1.0, 1.0], [1.0, 1.0])  # 1 decade only
    zero = S._shape("n", n, [1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    assert zero.verdict is Verdict.INCONCLUSIVE


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
    # the excess risk of least squares decays like 1/n, the bound like 1/√n: FAILS
    assert not out.holds and out.extra["slope_measured"] < -0.9
    assert out.extra["slope_bound"] == pytest.approx(-0.5, abs=0.1)
    original = ppfe.theorem7_terms

    def no_root(*a, **k):  # the √ dropped: every term squared
        t = original(*a, **k)
        return {key: v ** 2 for key, v in t.items()}

    monkeypatch.setattr(lin.ppfe, "theorem7_terms", no_root)
    lin._linear_ppfe.cache_clear()
    try:
        assert run_check(load_all()["ppfe.shape_theorem7_n"], size="quick").verdict \
            is Verdict.HOLDS
    finally:
        lin._linear_ppfe.cache_clear()
