"""The two selection checks (cgpfl.select_k_planted, cgpfl.heur_khat_planted): real verdicts
at quick size, and mutations of the claim / the measurement that flip them."""

from __future__ import annotations

import dataclasses

import pytest

from pfl_theory import cgpfl
from verification.selection import k_benchmark as selection_k
from verification.core.registry import Context, Verdict, load_all, run_check


def _run(check_id, *, params=None, tolerance=None):
    chk = load_all()[check_id]
    ctx = Context("quick", 0, {**chk.quick, **(params or {})},
                  chk.tolerance if tolerance is None else tolerance)
    out = chk.fn(ctx)
    return out, (Verdict(out.verdict) if out.verdict else
                 Verdict.HOLDS if out.holds else Verdict.FAILS)


def test_select_k_planted_reports_the_hard_cases():
    r = run_check(load_all()["cgpfl.select_k_planted"], size="quick", seed=0)
    m = r.measured
    assert m["runs"] == 12 and m["scale_invariant"] and m["consistent"]
    # measured at quick size: e(K) gets the easy grid within ±1 but not the hard one
    assert m["by_difficulty"]["easy"]["within1"] == 1.0
    assert m["by_difficulty"]["hard"]["within1"] < 0.9
    assert r.verdict is (Verdict.HOLDS if m["within1"] >= 0.9 else Verdict.FAILS)


def test_select_k_planted_holds_where_the_claim_is_true_and_fails_under_mutation(monkeypatch):
    easy = {"difficulties": {"easy": (10.0, 0.3)}}
    out, v = _run("cgpfl.select_k_planted", params=easy)
    assert v is Verdict.HOLDS, out.detail
    _, v = _run("cgpfl.select_k_planted", params=easy, tolerance=1.01)  # claim strengthened
    assert v is Verdict.FAILS
    orig = cgpfl.select_k
    monkeypatch.setattr(cgpfl, "select_k", lambda *a, **k: dataclasses.replace(
        orig(*a, **k), k_hat=min(orig(*a, **k).k_hat + 2, int(orig(*a, **k).ks[-1]))))
    out, v = _run("cgpfl.select_k_planted", params=easy)  # K̂ off by two
    assert v is Verdict.FAILS and out.measured["within1"] < 0.9


def _fake_results(e_within, e_lost, ref_lost, name="e_relative"):
    """Benchmark results with 10 records per selector: the given fractions of good records."""
    recs = []
    for name, within, lost in ((name, e_within, e_lost), ("grid_other_seed", 1.0, ref_lost)):
        for i in range(10):
            good_k, good_acc = i < round(10 * within), i < round(10 * lost)
            recs.append({"selector": name, "k_hat": 3 if good_k else 7, "best_k": 3,
                         "exact": good_k, "within1": good_k, "set_exact": good_k,
                         "set_within1": good_k, "acc_lost": 0.0 if good_acc else 0.05})
    return [{"records": recs, "large": {"records": recs}}]  # same records under both scorings


@pytest.mark.parametrize("e_within, e_lost, ref_lost, verdict", [
    (1.0, 1.0, 1.0, Verdict.HOLDS),
    (0.9, 0.9, 1.0, Verdict.HOLDS),
    (0.8, 1.0, 1.0, Verdict.INCONCLUSIVE),   # no accuracy lost, K̂ off: best K not resolved
    (0.2, 0.2, 1.0, Verdict.FAILS),          # loses accuracy where the reference does not
    (0.2, 0.5, 0.5, Verdict.INCONCLUSIVE),   # the reference loses as often: size cannot decide
])
@pytest.mark.parametrize("check_id, selector", [("cgpfl.heur_khat_planted", "e_relative"),
                                                ("cgpfl.khat_validation_planted", "val_loss")])
def test_benchmark_check_verdicts(monkeypatch, e_within, e_lost, ref_lost, verdict, check_id,
                                  selector):
    monkeypatch.setattr(selection_k, "run_benchmark",
                        lambda cases, cfg: _fake_results(e_within, e_lost, ref_lost, selector))
    out, v = _run(check_id)
    assert v is verdict, out.detail
    assert out.measured["set_within1"] == pytest.approx(e_within)
    assert out.measured["within1_strict"] == pytest.approx(e_within)
    assert out.measured["lost_le_1pt"] == pytest.approx(e_lost)


def test_validation_check_fails_when_the_selector_is_mutated(monkeypatch):
    # real quick runs (the measured value is the benchmark's agreement rate, best K on the
    # large test sample).  Measured at quick size: val_loss (argmin of the held-out
    # cross-entropy) is within ±1 of the noise-aware set in 7/8 records and loses ≤ 1 point in
    # 7/8, as often as the reference (7/8): INCONCLUSIVE at the 90% target (val, the accuracy
    # criterion: 6/8).  At a claim of 75% it HOLDS; with K̂ mutated to K = 1, or to the argmax
    # of the loss (a sign error in the criterion), it FAILS
    import numpy as np

    from algorithms.methods.clustered import cgpfl_validation as cv

    out, v = _run("cgpfl.khat_validation_planted")
    m = out.measured
    assert m["records"] == 8 and m["set_within1"] == 0.875 and m["lost_le_1pt"] == 0.875
    assert m["selectors"]["val"]["lost_le_1pt"] == 0.75
    assert m["small_test"]["val_loss"]["lost_le_1pt"] == 0.875
    assert v is Verdict.INCONCLUSIVE, out.detail
    out, v = _run("cgpfl.khat_validation_planted", tolerance=0.75)
    assert v is Verdict.HOLDS, out.detail
    orig = cv.choose
    with monkeypatch.context() as mp:
        mp.setattr(cv, "choose", lambda curve, se, rule: 1 if rule == "max" else orig(curve, se, rule))
        out, v = _run("cgpfl.khat_validation_planted", tolerance=0.75)
        assert v is Verdict.FAILS and out.measured["lost_le_1pt"] < 0.5, out.detail
    pick = cv.ValidationResult.pick

    def argmax_of_loss(self, criterion="accuracy", rule="max"):
        if criterion == "loss" and rule == "max":
            return int(np.argmax(self.loss_curve)) + 1
        return pick(self, criterion, rule)
    monkeypatch.setattr(cv.ValidationResult, "pick", argmax_of_loss)
    out, v = _run("cgpfl.khat_validation_planted", tolerance=0.75)
    assert v is Verdict.FAILS and out.measured["lost_le_1pt"] < 0.5, out.detail
