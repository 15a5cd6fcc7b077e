"""CGPFL Theorem 4.1 bound checks (verification/checks/bounds_cgpfl.py): verdicts at quick size, numeric
measured/bound/tightness, and each check able to fail: the bound shrunk by a stated factor
(larger than the check's tightness at quick size, seed 0) must give FAILS."""

from __future__ import annotations

import pytest

from verification.core.registry import Context, Verdict, load_all, run_check

#: quick-size verdict (seed 0) and the shrink factor that must break the bound
EXPECTED = {
    # both hold but sit above the trivial ρ_g²/K (Assumption 3 alone): VACUOUS
    "cgpfl.bound_thm41_stepwise": (Verdict.VACUOUS, 100.0),   # tightness ~14
    "cgpfl.bound_thm41_final": (Verdict.VACUOUS, 100.0),      # tightness ~20
}


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_verdict_and_numbers(check_id):
    res = run_check(load_all()[check_id], size="quick", seed=0)
    assert res.verdict == EXPECTED[check_id][0], res.detail
    assert res.check.kind == "bound"
    assert res.theoretical == pytest.approx(res.tightness * res.measured)
    assert res.vacuous is True and res.trivial is not None and res.theoretical > res.trivial


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_shrunk_bound_fails(check_id):
    chk = load_all()[check_id]
    ctx = Context(size="quick", seed=0, params={**chk.quick, "shrink": EXPECTED[check_id][1]},
                  tolerance=chk.tolerance)
    out = chk.fn(ctx)
    assert not out.holds, out.detail


def test_thm41b_envelope_holds_and_can_fail():
    chk = load_all()["cgpfl.bound_thm41b_personal"]
    res = run_check(chk, size="quick", seed=0)
    assert res.verdict == Verdict.HOLDS, res.detail  # spread ~1.1 over lam = 1..32
    assert res.check.kind == "envelope" and res.extra["C"] > 0
    ctx = Context(size="quick", seed=0, params={**chk.quick, "mutate": ("inflate_last", 1e3)},
                  tolerance=chk.tolerance)
    assert not chk.fn(ctx).holds  # one point 1000x off breaks the factor-10 envelope
    # the last point 3× above the envelope (band 2.5) fails the one-sided rule
    ctx = Context(size="quick", seed=0, params={**chk.quick, "mutate": ("inflate_last", 3.0)},
                  tolerance=chk.tolerance)
    assert not chk.fn(ctx).holds
    # δ_G²/λ instead of δ_G²/λ²: the shape falls slower than the gap — a looser upper bound,
    # which holds under the one-sided rule (issue 33); it failed the two-sided rule only by
    # 3.5 against 2.5, because the measured E‖∇G_K‖² term dominates the shape on this grid
    ctx = Context(size="quick", seed=0, params={**chk.quick, "lam_power": 1},
                  tolerance=chk.tolerance)
    assert chk.fn(ctx).holds


def _scaled_diagnostic(monkeypatch, key, factor):
    from algorithms.methods.clustered.cgpfl import CGPFL

    original = CGPFL.server_aggregate

    def wrong(self, phase, state, uploads, fed, model):
        state, nxt = original(self, phase, state, uploads, fed, model)
        return state.replace(tensors={**state.tensors, key: state.tensors[key] * factor}), nxt
    monkeypatch.setattr(CGPFL, "server_aggregate", wrong)


@pytest.mark.parametrize("check_id", ["cgpfl.bound_thm41_stepwise", "cgpfl.bound_thm41_final",
                                      "cgpfl.bound_thm41b_personal", "cgpfl.shape_thm41_T"])
@pytest.mark.parametrize("key,factor", [("grad_G_sq_over_K", 1.01),
                                        ("personal_gap_sq", 1.0 / 3.0)])  # a mean over d = 3
def test_the_measured_side_is_computed_twice(monkeypatch, check_id, key, factor):
    # issue 41: a diagnostic's scaling or a mean over coordinates moved these checks' numbers
    # without changing a verdict; the check's own computation now disagrees: FAILS
    base = run_check(load_all()[check_id], size="quick", seed=0)
    assert "computed twice" in base.detail and base.extra["diagnostics_computed_twice_rel"] < 1e-9
    _scaled_diagnostic(monkeypatch, key, factor)
    res = run_check(load_all()[check_id], size="quick", seed=0)
    assert res.verdict is Verdict.FAILS and "the measured side is wrong" in res.detail
