"""Each PPFE bound check HOLDS at quick size and FAILS when its bound is shrunk (or its
measurement inflated) by a stated factor — so a check that cannot fail would be caught."""

from __future__ import annotations

import math

import pytest

from verification.checks import bounds_ppfe as B
from verification.core.registry import Context, load_all

# check function, mutation, factor: the factors sit just beyond each check's measured
# tightness at quick size, seed 0 (lemma 4/6 perturbation ≈ 1.00/1.06, lemma 8 ≈ 1.3,
# covering ≈ 1.08 in log space), so they show how sharp each check is.
CASES = [
    ("ppfe.bound_lemma4_perturbation", B.lemma4_perturbation, "scale_measured", 1.1),
    ("ppfe.bound_lemma4_covering", B.lemma4_covering, "scale_bound", 0.9),
    ("ppfe.bound_lemma6_perturbation", B.lemma6_perturbation, "scale_measured", 1.2),
    ("ppfe.bound_lemma8_quantile", B.lemma8_quantile, "scale_bound", 0.7),
]


def _ctx(check_id: str) -> Context:
    chk = load_all()[check_id]
    return Context(size="quick", seed=0, params=dict(chk.quick), tolerance=chk.tolerance)


@pytest.mark.parametrize("check_id,fn,knob,factor", CASES, ids=[c[0] for c in CASES])
def test_holds_then_fails_under_mutation(check_id, fn, knob, factor):
    ctx = _ctx(check_id)
    out = fn(ctx)
    assert out.holds, out.detail
    assert math.isfinite(out.tightness) and out.tightness >= 1
    grid = out.extra["grid"]
    assert len(grid["values"]) >= 3 and len(grid["measured"]) == len(grid["bound"])
    mutated = fn(ctx, **{knob: factor})
    assert not mutated.holds, f"{check_id} with {knob}={factor} still holds: {mutated.detail}"


def test_lemma4_adversarial_search_beats_random_sampling():
    # the all-maximal corner attains Λη to first order: tightness within 1% of 1 at η = 1e-3
    gap = B._adversarial_gap([[3, 4, 1]], [1e-3], 0.0, 1.0, restarts=4, steps=50, seed=0)
    assert gap == pytest.approx(B._lambda([3, 4, 1]) * 1e-3, rel=0.01)


def test_lemma8_envelope_holds_and_fails_when_the_last_point_is_inflated():
    # spread ≈ 1.02 at quick size; inflating the largest-N n̄ point by 1.5 gives ≥ 1.47 > 1.25
    ctx = _ctx("ppfe.bound_lemma8_envelope")
    out = B.lemma8_envelope(ctx)
    assert out.holds and out.extra["C"] <= 1.0  # Lemma 8's constant is not exceeded
    nn = out.extra["N_nbar"]
    assert nn[-1] / nn[0] >= 10 ** 1.5
    assert not B.lemma8_envelope(ctx, inflate_last=1.5).holds


def test_lemma4_covering_fails_for_a_lambda_without_its_fan_in(monkeypatch):
    # a realistic wrong Λ: the sum over the d inputs forgotten (Λ = B_x + 1 instead of
    # d B_x + 1 at depth 1) — the bound falls below the exact covering lower bound at d ≥ 3
    from pfl_theory import ppfe

    original = ppfe.lemma4_log_covering

    def no_fan_in(widths, *, eps, weight_bound, input_bound, **kw):
        return original([1, 1], eps=eps, weight_bound=weight_bound, input_bound=input_bound) \
            * ppfe.fc_parameter_count(widths) / 2

    ctx = _ctx("ppfe.bound_lemma4_covering")
    assert B.lemma4_covering(ctx).holds
    monkeypatch.setattr(ppfe, "lemma4_log_covering", no_fan_in)
    out = B.lemma4_covering(ctx)
    assert not out.holds, out.detail


def test_affine_covering_lower_bound_is_below_an_explicit_grid_cover():
    # an explicit ε-cover of the affine class (grid of mesh 2ε/(d B_x + 1) per coefficient)
    # has (⌈(d B_x + 1) M/ε⌉)^{d+1} elements at most: the lower bound may not exceed it
    from verification.estimators.complexity import affine_log_covering_lower

    for d, eps in ((1, 0.1), (3, 0.01), (8, 1e-3)):
        explicit = (d + 1) * math.log(math.ceil((d + 1) / eps))
        assert affine_log_covering_lower(d, coef_bound=1.0, input_bound=1.0, eps=eps) <= explicit
    with pytest.raises(ValueError):
        affine_log_covering_lower(0, coef_bound=1.0, input_bound=1.0, eps=0.1)


def test_lemma4_inequality_is_two_sided_a_lambda_twice_too_large_fails(monkeypatch):
    # depth-1 nets attain Λη exactly, so ppfe.lemma4_perturbation also FAILS for a Λ that is
    # too large (a valid but wrong constant), not only for one that is too small
    from pfl_theory import ppfe
    from verification.checks import ppfe as theory_checks
    from verification.core.registry import Verdict, run_check

    chk = load_all()["ppfe.lemma4_perturbation"]
    assert run_check(chk, size="quick").verdict is Verdict.HOLDS
    original = ppfe.lemma4_log_constants

    def doubled(*a, **k):
        log_a, log_lam = original(*a, **k)
        return log_a, log_lam + math.log(2.0)

    monkeypatch.setattr(theory_checks.ppfe, "lemma4_log_constants", doubled)
    assert run_check(chk, size="quick").verdict is Verdict.FAILS
