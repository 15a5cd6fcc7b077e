"""The PPFE bound transcription checks (verification/checks/transcriptions_ppfe_bounds.py):
every check HOLDS (two seeds, both sizes), and every generated mutant of every
pfl_theory.ppfe_bounds function (verification.mutation.generated, all of them, not only the
8 the mutation run draws) makes its check FAIL; none survives."""

from __future__ import annotations


import pytest

from pfl_theory import ppfe_bounds
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, formula_functions, mutants_of

MODULE = "pfl_theory.ppfe_bounds"
#: pfl_theory.ppfe_bounds function → the transcription check that compares it
CHECK_OF = {
    "stage_parameter_counts": "theorem7", "theorem7_terms": "theorem7", "s_t": "corollary2",
    "corollary2_terms": "corollary2", "lemma9_minimize": "lemma9",
    "lemma9_asymptotic": "lemma9_asymptotic", "boosting_bias_bound": "adaboost_chain",
    "adaboost_bound_chain": "adaboost_chain", "kappa0_from_ingredients": "kappa0",
    "stage_edge": "stage_edge", "select_stages": "select_stages",
}


def _checks():
    return {cid: c for cid, c in load_all().items()
            if cid.removeprefix("ppfe.transcription_") in set(CHECK_OF.values())}


def test_every_function_has_a_transcription_check():
    assert {f for m, f in formula_functions() if m == MODULE} == set(CHECK_OF)
    assert len(_checks()) == len(set(CHECK_OF.values()))


@pytest.mark.parametrize("size,seed", [("quick", 0), ("quick", 3), ("full", 1)])
def test_every_check_holds(size, seed):
    for cid, chk in _checks().items():
        r = run_check(chk, size=size, seed=seed)
        assert r.verdict is Verdict.HOLDS, f"{cid}: {r.detail}"


def survivors(module: str, function: str, chk) -> tuple[list[str], int]:
    """(names of the exercised mutants under which ``chk`` still HOLDS, number killed)."""
    survived, killed = [], 0
    for mutant in mutants_of(module, function, limit=10_000):
        with applied(mutant) as tracker:
            verdict = run_check(chk, size="quick", seed=0).verdict
        if not tracker.hits or tracker.invalid:
            continue  # not exercised (a list argument, or a value the function rejects)
        if verdict is Verdict.HOLDS:
            survived.append(mutant.name)
        else:
            killed += 1
    return survived, killed


@pytest.mark.parametrize("function", sorted(CHECK_OF))
def test_every_generated_mutant_fails_its_check(function):
    chk = _checks()[f"ppfe.transcription_{CHECK_OF[function]}"]
    survived, killed = survivors(MODULE, function, chk)
    assert killed > 0 and survived == []


def test_the_integer_choice_of_T_is_checked(monkeypatch):
    original = ppfe_bounds.select_stages

    def off_by_one(**kw):
        got = original(**kw)
        return type(got)(**{**got.__dict__, "t_star": max(got.t_star - 1, 1) if got.t_star > 1
                            else 2})
    monkeypatch.setattr(ppfe_bounds, "select_stages", off_by_one)
    assert run_check(_checks()["ppfe.transcription_select_stages"], size="quick",
                     seed=0).verdict is Verdict.FAILS


def test_the_endpoint_case_of_lemma9_is_checked(monkeypatch):
    """Dropping the endpoint correction (interior minimiser whenever κ > √(2e)) fails."""
    original = ppfe_bounds.lemma9_minimize

    def no_endpoint(a, b, c):
        got = original(a, b, c)
        return type(got)(**{**got.__dict__, "x_star": c, "value": a * c, "u_star": 0.0,
                            "interior": False}) if got.interior else got
    monkeypatch.setattr(ppfe_bounds, "lemma9_minimize", no_endpoint)
    assert run_check(_checks()["ppfe.transcription_lemma9"], size="quick",
                     seed=0).verdict is Verdict.FAILS
