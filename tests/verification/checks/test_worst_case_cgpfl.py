"""The CGPFL worst-case check: it holds at the paper's step and fails on a wrong constant."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("PEPit")

from pfl_theory import cgpfl  # noqa: E402
from verification.core.registry import Verdict, load_all, run_check  # noqa: E402

NAME = "cgpfl.worst_case_thm41_fixed"


def _run(**params):
    chk = load_all()[NAME]
    chk = dataclasses.replace(chk, quick={**chk.quick, **params})
    return run_check(chk, size="quick", seed=0)


def test_holds_with_engine_below_worst_below_bound_and_reports_both_ratios():
    res = _run()
    assert res.verdict is Verdict.HOLDS, res.detail
    ex = res.extra
    assert ex["measured_engine"] <= ex["worst_case"] * 1.02 <= ex["bound"]
    assert ex["looseness"] == pytest.approx(4 / ex["exact_constant"], rel=1e-9)
    assert "theorem's looseness" in res.detail and "instance's easiness" in res.detail


def test_a_bound_below_the_worst_case_fails():
    # 4 → 0.8: below the exact constant ~1.01
    assert _run(mutate_bound=0.2).verdict is Verdict.FAILS


def test_a_mutated_theorem_formula_fails(monkeypatch):
    # 4Δ_G/(α̂T) → 4Δ_G/(α̂T²): the rate in T wrong by one power (T = 3)
    orig = cgpfl.theorem41_stepwise
    monkeypatch.setattr(cgpfl, "theorem41_stepwise",
                        lambda **k: orig(**k) / k["rounds"] / 2)
    assert _run().verdict is Verdict.FAILS


def _run_printed(**params):
    chk = load_all()["cgpfl.worst_case_thm41_printed_G"]
    chk = dataclasses.replace(chk, quick={**chk.quick, **params})
    return run_check(chk, size="quick", seed=0)


def test_printed_normalisation_is_an_erratum_measured_against_the_proofs_reading():
    res = _run_printed()                    # K = 3 contexts of 2: m = 6, worst/bound ≈ 6/4
    assert res.verdict is Verdict.ERRATUM, res.detail
    assert res.erratum_basis == "measured"
    # the erratum names its text: the IJCAI normalisation; the ICLR text is consistent
    for text in (res.detail, res.check.reference):
        assert "IJCAI" in text and "§3" in text and "ICLR" in text and "§4.1/A.1" in text
    ex = res.extra
    assert ex["worst_case"] / ex["bound"] == pytest.approx(1.5, rel=0.05)
    assert ex["proof_reading_worst_case"] <= ex["proof_reading_bound"]
    assert ex["measured_engine"] <= ex["worst_case"] * 1.02


def test_printed_normalisation_holds_when_k_times_cluster_size_is_below_four():
    # m = 2 (one context of two clients): worst ≈ (2/4)·bound — the bound holds
    res = _run_printed(contexts=1)
    assert res.verdict is Verdict.HOLDS, res.detail


def test_printed_check_fails_when_neither_reading_holds(monkeypatch):
    # a bound formula 10× too small breaks the proof's reading too: FAILS, not ERRATUM
    orig = cgpfl.theorem41_stepwise
    monkeypatch.setattr(cgpfl, "theorem41_stepwise", lambda **k: orig(**k) / 10)
    assert _run_printed().verdict is Verdict.FAILS
