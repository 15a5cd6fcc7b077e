"""Every registered envelope check names its grid, so that the rules of
verification/core/envelope.py apply to it: no HOLDS on a grid on which neither side moves."""

from __future__ import annotations

import pytest

from verification.core.envelope import FLAT_SLOPE
from verification.core.registry import Verdict, load_all, run_check


@pytest.mark.slow
def test_every_envelope_check_passes_a_grid_and_none_holds_on_a_flat_one():
    # ~1–2 min on a shared 2-core CPU: every envelope check at its quick size
    for cid, chk in load_all().items():
        if chk.kind != "envelope":
            continue
        res = run_check(chk, size="quick")
        assert res.verdict is not Verdict.ERROR, (cid, res.detail)
        if res.verdict is Verdict.INCONCLUSIVE and res.measured is None:
            continue  # no ratio (a measurement <= 0): nothing to fit
        assert "slope_measured" in res.extra, f"{cid}: envelope without its grid"
        flat = (abs(res.extra["slope_measured"]) < FLAT_SLOPE
                and abs(res.extra["slope_bound"]) < FLAT_SLOPE)
        assert not (flat and res.verdict is Verdict.HOLDS), cid
