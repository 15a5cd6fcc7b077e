"""verification/worst_case/cgpfl_analysis.py: the report of pflt worst-case --algorithm cgpfl."""

from __future__ import annotations

import pytest

from verification.worst_case import cgpfl_analysis as ca
from verification.worst_case.cgpfl import CGPFLSetting

pytest.importorskip("PEPit")


def test_analysis_sandwiches_engine_worst_case_and_bound():
    res = ca.analyse(CGPFLSetting(rounds=2), steps=False)
    assert res["measured"] <= res["worst_case"] * 1.02 <= res["bound"]
    # the exact constant of Δ_G/(α̂T): ~1 at the theorem's small step, where the theorem has 4
    assert 0.9 < res["exact_constant"] < 1.2
    assert res["looseness"] == pytest.approx(4 / res["exact_constant"], rel=1e-9)
    assert all(res["hypotheses"].values())
    text = ca.render(res)
    assert "bound holds" in text and "the theorem: 4" in text


def test_a_step_beyond_the_theorems_is_flagged_as_outside_its_hypotheses():
    s = CGPFLSetting(rounds=2)
    res = ca.analyse(CGPFLSetting(rounds=2, beta=2 * s.beta_max), steps=False)
    assert res["hypotheses"]["β ≤ β_max (stated and proof's)"] is False
    assert "NO" in ca.render(res)


def test_the_bound_holds_at_the_theorems_step_and_not_far_beyond_it():
    s = CGPFLSetting(rounds=2, local_rounds=1)
    assert ca.holds_at(s, 1.0)
    assert not ca.holds_at(s, 200.0)        # unstable local steps: unbounded worst case


def test_bisection_brackets_the_largest_valid_factor(monkeypatch):
    monkeypatch.setattr(ca, "holds_at", lambda s, f, solver="clarabel": f <= 10.0)
    f = ca.largest_valid_factor(CGPFLSetting(), hi=64.0, iters=8)
    assert 10.0 / 1.05 < f <= 10.0
    monkeypatch.setattr(ca, "holds_at", lambda s, f, solver="clarabel": False)
    assert ca.largest_valid_factor(CGPFLSetting()) == 1.0


@pytest.mark.parametrize("kw,match", [({"rounds": 9}, "too large"),
                                      ({"contexts": 3, "per_context": 2}, "clients")])
def test_sizes_beyond_a_quick_exact_pep_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ca.validate(CGPFLSetting(**kw))


def test_bisection_reports_every_solve(monkeypatch):
    monkeypatch.setattr(ca, "holds_at", lambda s, f, solver="clarabel": f <= 5.0)
    seen = []
    ca.largest_valid_factor(CGPFLSetting(), hi=64.0, iters=3, report=lambda f, ok: seen.append((f, ok)))
    assert seen[:2] == [(1.0, True), (64.0, False)] and len(seen) == 5


def test_render_says_when_the_search_top_was_reached():
    res = ca.analyse(CGPFLSetting(rounds=1, local_rounds=1), steps=False)
    res.update(beta_max=0.1, largest_valid_factor=ca.SEARCH_TOP)
    assert "≥ 64 (the top of the search)" in ca.render(res)
    res["largest_valid_factor"] = 9.7
    assert "≈ 9.7 ×" in ca.render(res)
