"""The PPFE covering transcription checks (verification/checks/transcriptions_ppfe_covering.py):
every check HOLDS (two seeds, both sizes), and every generated mutant of every
pfl_theory.ppfe_covering function (verification.mutation.generated, all of them) makes its
check FAIL, except the provably equivalent ones named below."""

from __future__ import annotations


import numpy as np
import pytest

from pfl_theory import ppfe_covering
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, formula_functions, mutants_of

MODULE = "pfl_theory.ppfe_covering"
CHECK_OF = {
    "fc_parameter_count": "lemma4", "lemma4_log_constants": "lemma4",
    "lemma4_log_covering": "lemma4", "lemma5_composition": "lemma5", "alpha_grid": "lemma6",
    "lemma6_cover_radius": "lemma6", "lemma6_log_cover_size": "lemma6",
    "lemma6_log_covering": "lemma6_allocation", "harmonic_mean_size": "lemma8",
    "lemma8_deviation": "lemma8", "union_bound_deviation": "union_bound",
}
#: mutants that cannot change any value: why
EQUIVALENT = {
    "ppfe_covering.lemma4_log_constants:weight_bound<->act_lipschitz":
        "M and L_σ enter A_l = L_σ M (d A_{l−1} + 1) + c_0 and Λ (c_l Π c_k M has as many "
        "L_σ as M factors) only through their product",
    "ppfe_covering.lemma5_composition:log_cover_g<->log_cover_f": "log N_G + log N_F is symmetric",
    "ppfe_covering.lemma5_composition:eps_f<->lipschitz_g": "L_g ε_f is symmetric",
    "ppfe_covering.lemma6_cover_radius:eps_alpha<->output_bound": "T B_h ε_α is symmetric",
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


@pytest.mark.parametrize("function", sorted(CHECK_OF))
def test_every_generated_mutant_fails_its_check(function):
    chk = _checks()[f"ppfe.transcription_{CHECK_OF[function]}"]
    survived, killed = [], 0
    for mutant in mutants_of(MODULE, function, limit=10_000):
        with applied(mutant) as tracker:
            verdict = run_check(chk, size="quick", seed=0).verdict
        if not tracker.hits or tracker.invalid:
            continue  # not exercised (a list argument, or a value the function rejects)
        if verdict is Verdict.HOLDS:
            survived.append(mutant.name)
        else:
            killed += 1
    assert sorted(survived) == sorted(k for k in EQUIVALENT
                                      if k.split(":")[0] == f"ppfe_covering.{function}")
    assert killed > 0 or function == "fc_parameter_count"


def test_a_wrong_parameter_count_and_a_sparse_alpha_grid_fail(monkeypatch):
    original_count, original_grid = ppfe_covering.fc_parameter_count, ppfe_covering.alpha_grid
    chk = _checks()
    monkeypatch.setattr(ppfe_covering, "fc_parameter_count", lambda w: original_count(w) + 1)
    assert run_check(chk["ppfe.transcription_lemma4"], size="quick",
                     seed=0).verdict is Verdict.FAILS
    monkeypatch.setattr(ppfe_covering, "fc_parameter_count", original_count)
    # same number of points, but spread over [−A, A] leaving a gap in the middle
    monkeypatch.setattr(ppfe_covering, "alpha_grid", lambda A, e: np.sign(
        original_grid(A, e)) * np.maximum(np.abs(original_grid(A, e)), A / 2))
    assert run_check(chk["ppfe.transcription_lemma6"], size="quick",
                     seed=0).verdict is Verdict.FAILS


def test_an_infeasible_allocation_fails(monkeypatch):
    original = ppfe_covering.lemma6_log_covering

    def greedy(fns, **kw):  # doubles every radius and reports the (smaller) value there
        from verification.transcriptions import ppfe_covering as T
        got = original(fns, **kw)
        eps_stages, eps_alpha = 2 * got.eps_stages, 2 * got.eps_alpha
        value = T.lemma6_objective(fns, eps_stages, eps_alpha, coef_bound=kw["coef_bound"])
        return type(got)(value, eps_stages, eps_alpha)
    monkeypatch.setattr(ppfe_covering, "lemma6_log_covering", greedy)
    assert run_check(_checks()["ppfe.transcription_lemma6_allocation"], size="quick",
                     seed=0).verdict is Verdict.FAILS
