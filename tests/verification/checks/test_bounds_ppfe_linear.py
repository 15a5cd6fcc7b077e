"""PPFE Theorem 7 / Corollary 2 checks on the linear generator: HOLD at quick size, FAIL
when the bound is shrunk by a stated factor (just beyond the measured tightness ≈ 4e4 for
Theorem 7 and ≈ 7e4 for Corollary 2 at quick size, seed 0)."""

from __future__ import annotations

import math

import pytest

from verification.checks import bounds_ppfe_linear as B
from verification.core.registry import Context, load_all

CASES = [
    ("ppfe.bound_theorem7_union", B.theorem7_union, 1e-5),
    ("ppfe.bound_theorem7_calculator", B.theorem7_calculator, 1e-5),
    ("ppfe.bound_corollary2_clients", B.corollary2_clients, 1e-5),
]


@pytest.mark.parametrize("check_id,fn,factor", CASES, ids=[c[0] for c in CASES])
def test_holds_then_fails_when_the_bound_shrinks(check_id, fn, factor):
    chk = load_all()[check_id]
    ctx = Context(size="quick", seed=0, params=dict(chk.quick), tolerance=chk.tolerance)
    out = fn(ctx)
    assert out.holds and math.isfinite(out.tightness) and out.tightness >= 1, out.detail
    assert len(out.extra["grid"]["values"]) >= 3
    assert not fn(ctx, scale_bound=factor).holds


def test_excess_risk_decreases_with_n_and_is_flat_in_n_clients():
    r = B._linear_ppfe(0, 3, ((10, 20), (10, 600), (40, 20)), 0.05)
    assert r["excess"][1] < r["excess"][0] / 5  # ≈ σ² d / n: 30× fewer samples' error
    # personal least squares: the excess does not improve with N (Corollary 2's
    # personalized term is N-free); 2× covers the sampling noise of one draw
    assert 0.5 < r["excess"][2] / r["excess"][0] < 2

