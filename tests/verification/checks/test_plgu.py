"""The PLGU checks (verification/checks/plgu.py) run at quick size with the expected verdicts."""

from __future__ import annotations

import pytest

from verification.core.registry import Verdict, load_all, run_check

EXPECTED = {
    "plgu.perturbation_norm": Verdict.HOLDS,
    "plgu.perturbation_norm_printed_exponent": Verdict.ERRATUM,  # documented erratum (§D.2)
    "plgu.layer_perturbation_norms": Verdict.HOLDS,
    "plgu.first_order_ascent": Verdict.HOLDS,
    "plgu.rademacher_linear": Verdict.HOLDS,
}


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_plgu_check_verdict_and_determinism(check_id):
    chk = load_all()[check_id]
    a, b = run_check(chk, size="quick", seed=0), run_check(chk, size="quick", seed=0)
    assert a.verdict == EXPECTED[check_id], a.detail
    assert a.measured == b.measured  # same seed => same numbers
