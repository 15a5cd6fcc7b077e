"""PLGU bound checks: each HOLDS (or, for the term-4 readings that the measurement refutes,
FAILS) at quick size, and the verdict flips under a stated mutation — shrinking the bound /
inflating the measurement for the holding ones, restricting the grid to B ≥ 1 for the
failing readings (they fail only through their B² / B^L scaling at small inputs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.checks import bounds_plgu as B
from verification.estimators.complexity import rademacher_mlp_lower
from verification.core.registry import Context, load_all

# factors just beyond each check's tightness at quick size, seed 0: Lemma 2 ≈ 7,
# Lemma 4 total ≈ 4, linear reading ≈ 200, Theorems 1–3 ≈ 4e4 / 1.5e3 / 6e4
HOLDING = [
    ("plgu.bound_lemma2_rademacher", B.lemma2_rademacher, "scale_bound", 1 / 10),
    ("plgu.bound_lemma4_total", B.lemma4_total, "scale_measured", 6.0),
    ("plgu.bound_term4_linear", B.term4_linear, "scale_bound", 1 / 400),
    ("plgu.bound_theorem1_gap", B.theorem_thm1, "scale_bound", 1e-5),
    ("plgu.bound_theorem2_gap", B.theorem_thm2, "scale_bound", 1e-4),
    ("plgu.bound_theorem3_gap", B.theorem_thm3, "scale_bound", 1e-5),
]
FAILING = [("plgu.bound_term4_printed", B.term4_printed),
           ("plgu.bound_term4_oform", B.term4_oform),
           ("plgu.bound_term4_display", B.term4_display)]


def _ctx(check_id: str, **override) -> Context:
    chk = load_all()[check_id]
    return Context(size="quick", seed=0, params={**chk.quick, **override},
                   tolerance=chk.tolerance)


@pytest.mark.parametrize("check_id,fn,knob,factor", HOLDING, ids=[c[0] for c in HOLDING])
def test_holding_checks_fail_under_mutation(check_id, fn, knob, factor):
    ctx = _ctx(check_id)
    out = fn(ctx)
    assert out.holds, out.detail
    assert out.tightness >= 1 and math.isfinite(out.theoretical)
    assert len(out.extra["grid"]["values"]) >= 3
    assert not fn(ctx, **{knob: factor}).holds


@pytest.mark.parametrize("check_id,fn", FAILING, ids=[c[0] for c in FAILING])
def test_quadratic_term4_readings_fail_only_at_small_inputs(check_id, fn):
    out = fn(_ctx(check_id))
    assert not out.holds and out.tightness < 1, out.detail
    assert out.extra["grid"]["values"][0] <= 1e-5  # refuted at the smallest input scale
    assert fn(_ctx(check_id, scales=[1.0, 10.0])).holds  # and holds at B >= 1


def test_measured_rademacher_is_linear_in_the_input_scale():
    # bias-free ReLU nets are positively homogeneous: R̂ at scale 10 B is 10 × R̂ at B (the
    # reason any reading with B² or B^L in the adversarial term must fail at small B)
    x = np.random.default_rng(0).normal(size=(30, 4))
    kw = dict(widths=[4, 6, 6, 1], spectral_bounds=[1.5, 1.2, 1.0], n_draws=16, steps=60,
              seed=1)
    small, _ = rademacher_mlp_lower(0.1 * x, **kw)
    large, _ = rademacher_mlp_lower(x, **kw)
    assert large == pytest.approx(10 * small, rel=1e-6)  # same signs, scale-free ascent


def test_trained_gaps_shrink_with_the_sample_size():
    r = B._theorems(0, 8, (16, 48, 160), 150)
    assert r["gap_lf"][2] < r["gap_lf"][0] and r["gap_ghn"][2] < r["gap_ghn"][0]


def test_rademacher_envelope_holds_and_fails_when_the_last_point_is_inflated():
    # spread at quick size ≈ 1.2; inflating the largest-m measurement 2× pushes the spread
    # to ≥ 2/1.2 > 1.5 = the factor fixed in the check
    ctx = _ctx("plgu.bound_lemma2_envelope_m")
    out = B.lemma2_envelope_m(ctx)
    assert out.holds and out.extra["C"] > 0 and len(out.extra["m"]) >= 4
    assert out.extra["m"][-1] / out.extra["m"][0] >= 10 ** 1.5  # ≥ 1.5 decades
    assert not B.lemma2_envelope_m(ctx, inflate_last=2.0).holds


def test_vacuous_theorem_bounds_carry_certificates_that_hold_on_unseen_held_out_data(
        monkeypatch):
    from verification.core.registry import Verdict, load_all, run_check
    from verification.estimators import certificates

    for cid in ("plgu.bound_theorem1_gap", "plgu.bound_theorem3_gap"):
        res = run_check(load_all()[cid], size="quick")
        assert res.verdict is Verdict.VACUOUS
        cert = res.to_dict()["certificate"]
        assert cert["value"] < 1.0 <= res.theoretical and cert["delta"] == 0.05  # informative
        # at every m̂: the held-out gap on the 4000 samples per client the certificate never
        # saw lies below the test-set certificate
        per_m = res.extra["certificates_per_m"]["test_set"]
        assert all(c["value"] >= g for c, g in zip(per_m, res.extra["heldout_gap_per_m"]))
    # mutation: a kl inverse 0.05 too small certifies less than the held-out gap somewhere
    B._theorems.cache_clear()
    monkeypatch.setattr(certificates, "kl_inverse_upper", lambda q, c: max(q - 0.05, 0.0))
    try:
        res = run_check(load_all()["plgu.bound_theorem1_gap"], size="quick")
        per_m = res.extra["certificates_per_m"]["test_set"]
        assert any(c["value"] < g for c, g in zip(per_m, res.extra["heldout_gap_per_m"]))
    finally:
        B._theorems.cache_clear()
