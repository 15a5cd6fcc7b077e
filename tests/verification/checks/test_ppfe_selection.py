"""ppfe.select_stages_benchmark: the real verdict at quick size (FAILS), a select_stages that
picks the best T (HOLDS) and one that picks T = 1 (FAILS), and the three-way verdict rule on
planted benchmark outcomes."""

from __future__ import annotations

import dataclasses

import pytest

from pfl_theory import ppfe_bounds
from verification.selection import stages_linear as selection_stages
from verification.selection.stage_selectors import REFERENCES
from verification.core.registry import Context, Verdict, load_all

CHECK = "ppfe.select_stages_benchmark"


def _run(*, tolerance=None):
    chk = load_all()[CHECK]
    ctx = Context("quick", 0, dict(chk.quick), chk.tolerance if tolerance is None else tolerance)
    out = chk.fn(ctx)
    return out, (Verdict(out.verdict) if out.verdict else
                 Verdict.HOLDS if out.holds else Verdict.FAILS)


def test_quick_fails_and_holds_when_select_stages_picks_the_best_t(monkeypatch):
    # measured at quick size (best T from 20 draws: 3 in both configurations): the bound
    # picks T = t_max = 6, more than one stage from every near-best T -> FAILS
    out, v = _run()
    assert v is Verdict.FAILS, out.detail
    assert out.measured["within1"] == 0.0 and out.measured["records"] == 6
    assert set(out.measured["selectors"]) == set(selection_stages.STAGE_SELECTORS + REFERENCES)
    orig = ppfe_bounds.select_stages
    # a select_stages returning the best T makes it HOLD (the check can pass) ...
    monkeypatch.setattr(selection_stages, "select_stages",
                        lambda **k: dataclasses.replace(orig(**k), t_star=3))
    out, v = _run()
    assert v is Verdict.HOLDS and out.measured["within1"] == 1.0, out.detail
    # ... and T̂ = 1 (stage 0 alone) FAILS again
    monkeypatch.setattr(selection_stages, "select_stages",
                        lambda **k: dataclasses.replace(orig(**k), t_star=1))
    out, v = _run()
    assert v is Verdict.FAILS and out.measured["within1"] == 0.0, out.detail


def _fake(bound, cv_lost):
    """Results with 10 records per selector; ``bound`` = (±1, noise-aware ±1, ≤1%) fractions."""
    recs = []
    for name, (w1, w1na, lost) in (("bound", bound), ("cv", (1.0, 1.0, cv_lost))):
        for i in range(10):
            recs.append({"selector": name, "t_hat": 2, "best_t": 2, "exact": False,
                         "within1": i < round(10 * w1), "exact_na": False,
                         "within1_na": i < round(10 * w1na),
                         "excess": 0.0 if i < round(10 * lost) else 0.05})
    return [{"records": recs}]


@pytest.mark.parametrize("bound, cv_lost, verdict", [
    ((1.0, 1.0, 1.0), 1.0, Verdict.HOLDS),
    ((0.9, 0.9, 0.9), 1.0, Verdict.HOLDS),
    ((0.5, 0.9, 0.9), 0.9, Verdict.INCONCLUSIVE),  # misses only T the seeds cannot separate
    ((0.5, 0.6, 1.0), 1.0, Verdict.FAILS),           # off by > 1 from every near-best T
    ((0.5, 0.9, 0.7), 0.9, Verdict.FAILS),          # loses > 1 % where cross-validation does not
    ((0.5, 0.9, 0.7), 0.7, Verdict.INCONCLUSIVE),   # ... but cross-validation loses as often
])
def test_verdict_rule(monkeypatch, bound, cv_lost, verdict):
    monkeypatch.setattr(selection_stages, "run_stage_benchmark", lambda *a, **k: _fake(bound, cv_lost))
    out, v = _run()
    assert v is verdict, out.detail
    assert out.measured["within1"] == pytest.approx(bound[0])
    assert out.measured["lost_le_1pt"] == pytest.approx(bound[2])
