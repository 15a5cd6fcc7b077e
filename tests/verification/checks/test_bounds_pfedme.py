"""pFedMe Theorem 1 bound checks (verification/checks/bounds_pfedme.py): verdicts at quick size, and
each check able to fail (the measurement at the largest grid point inflated: 1000× breaks a
factor-10 envelope; 1e5× lifts it above the bound of the upper-bound checks, whose last
measured/bound is ~5e-5 and ~1e-3) and able to hold (shape replaced by 3 × the measurement)."""

from __future__ import annotations

import pytest

from verification.core.registry import Context, Verdict, load_all, run_check

#: quick-size verdicts, seed 0 (the findings are in each check's detail)
#: the upper bounds over T (kind ``bound``: measured <= bound at every T; issue 24)
UPPER = {"pfedme.bound_thm1_quadratic", "pfedme.bound_thm1_mlr"}
EXPECTED = {
    "pfedme.bound_thm1_quadratic": Verdict.HOLDS,  # C = 0.10 <= 1; loose along T (spread ~2e3)
    "pfedme.bound_thm1_mlr": Verdict.HOLDS,        # C ~ 0.06 <= 1; loose along T (spread ~50)
    "pfedme.bound_thm1_floor": Verdict.HOLDS,      # spread ~1.7 over delta^2 (|D| = 1..32)
    "pfedme.bound_thm1_sampling": Verdict.HOLDS,   # spread ~1.8, C ~ 1.0 over N/S - 1 = 1..32
}


def _run(check_id, **params):
    chk = load_all()[check_id]
    ctx = Context(size="quick", seed=0, params={**chk.quick, **params}, tolerance=chk.tolerance)
    return chk.fn(ctx)


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_verdict_and_numbers(check_id):
    res = run_check(load_all()[check_id], size="quick", seed=0)
    assert res.verdict == EXPECTED[check_id], res.detail
    assert res.check.kind == ("bound" if check_id in UPPER else "envelope")
    assert res.tightness > 0 and res.extra["C"] > 0
    grid = res.extra.get("N/S-1", res.extra.get("delta_sq", res.extra.get("T")))
    assert min(grid) * 31.6 <= max(grid)  # >= 1.5 decades of the rate's variable


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_mutations(check_id):
    inflated = _run(check_id, mutate=("inflate_last", 1e5 if check_id in UPPER else 1e3))
    assert not inflated.holds, inflated.detail
    same = _run(check_id, mutate=("shape_is_measured", 3.0))
    assert same.holds and same.extra["C"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("check_id", sorted(UPPER))
def test_upper_bound_checks_report_the_worst_case_exponent(check_id):
    pytest.importorskip("PEPit")     # the quadratic one uses the closed form, the MLR one a PEP
    res = _run(check_id)
    assert "too slow" in res.detail and res.extra["spread"] > 10, res.detail
