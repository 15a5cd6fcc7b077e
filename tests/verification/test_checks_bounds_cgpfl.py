"""CGPFL bound checks (verification/checks/bounds_cgpfl.py): verdicts at quick size, numeric
measured/bound/tightness, and each check able to fail: the bound shrunk by a stated factor
(larger than the check's tightness at quick size, seed 0) must give FAILS."""

from __future__ import annotations

import pytest

from verification.registry import Context, Verdict, load_all, run_check

#: quick-size verdict (seed 0) and the shrink factor that must break the bound
EXPECTED = {
    "cgpfl.bound_thm41_stepwise": (Verdict.HOLDS, 100.0),   # tightness ~14
    "cgpfl.bound_thm41_final": (Verdict.HOLDS, 100.0),      # tightness ~20
    "cgpfl.bound_thm42_gap": (Verdict.HOLDS, 1e4),          # tightness ~700 (vacuous)
}


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_verdict_and_numbers(check_id):
    res = run_check(load_all()[check_id], size="quick", seed=0)
    assert res.verdict == EXPECTED[check_id][0], res.detail
    assert res.check.kind == "bound"
    assert res.theoretical == pytest.approx(res.tightness * res.measured)
    assert res.vacuous is not None


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


def test_cgpfl_solution_is_the_bilevel_fixed_point():
    """θ*_i solves the upper level (∇L_D̃i(θ) + λ(θ − ω_k(i)) = 0) and Ω* are the cluster
    means of Θ* (lower level for the partition found)."""
    import numpy as np

    from synthetic.contexts import regression_contexts
    from verification.checks.bounds_cgpfl import cgpfl_solution

    data = regression_contexts(9, 3, dim=3, tau=0.2, noise=0.3, size_range=(20, 20), seed=1)
    theta, omega, labels = cgpfl_solution(data.xs, data.ys, k=3, lam=4.0, seed=1)
    for x, y, th, lab in zip(data.xs, data.ys, theta, labels):
        grad = x.T @ (x @ th - y) / len(x) + 4.0 * (th - omega[lab])
        assert np.abs(grad).max() < 1e-10  # float64 solve of a 3x3 system
    for j in range(3):
        np.testing.assert_allclose(omega[j], theta[labels == j].mean(0), atol=1e-12)
