"""The pFedMe transcription checks: each HOLDS on the real pfl_theory.pfedme, and each is
made to FAIL by the generated formula mutants of the functions it covers (all of them,
except the ones named below with the reason they cannot change the value)."""

from __future__ import annotations


import numpy as np
import pytest
import sympy as sp

from pfl_theory import pfedme
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, mutants_of, patched

CHECK_OF = {
    "lemma1_delta_sq": "pfedme.transcription_lemma1",
    "lemma2a_bound": "pfedme.transcription_lemma2",
    "sigma_F2_sq": "pfedme.transcription_lemma2",
    "lemma2b_bound": "pfedme.transcription_lemma2",
    "sigma_F1_sq": "pfedme.transcription_lemma2",
    "gradient_diversity": "pfedme.transcription_lemma2",
    "eta_hat_1": "pfedme.transcription_step_sizes",
    "eta_hat_2": "pfedme.transcription_step_sizes",
    "local_step_bound": "pfedme.transcription_step_sizes",
    "min_rounds_theorem1": "pfedme.transcription_step_sizes",
    "theorem1a": "pfedme.transcription_theorem1",
    "theorem1b": "pfedme.transcription_theorem1",
    "theorem1a_symbolic": "pfedme.transcription_theorem1",
    "theorem2a": "pfedme.transcription_theorem2",
    "theorem2b": "pfedme.transcription_theorem2",
    "theorem2a_symbolic": "pfedme.transcription_theorem2",
    "corollary1_beta": "pfedme.transcription_corollaries",
    "corollary1_beta_symbolic": "pfedme.transcription_corollaries",
    "corollary2_choice": "pfedme.transcription_corollaries",
}
#: mutants that provably leave the value unchanged, with the reason
EQUIVALENT = {
    "pfedme.lemma2a_bound:lam<->F_gap": "4 L_F (F(w)−F(w*)) = 4 λ F_gap is symmetric in λ, F_gap",
    "pfedme.local_step_bound:beta<->R": "η̂/(βR) is symmetric in β, R",
}
CHECKS = load_all()


def _verdict(check_id: str) -> Verdict:
    with np.errstate(all="ignore"):
        return run_check(CHECKS[check_id], size="quick", seed=0).verdict


def test_every_public_pfedme_formula_is_covered():
    from verification.mutation.generated import formula_functions
    assert {f for m, f in formula_functions() if m == "pfl_theory.pfedme"} == set(CHECK_OF)


@pytest.mark.parametrize("check_id", sorted(set(CHECK_OF.values())))
@pytest.mark.parametrize("seed", [0, 7])
def test_check_holds(check_id, seed):
    r = run_check(CHECKS[check_id], size="quick", seed=seed)
    assert r.verdict is Verdict.HOLDS, r.detail
    assert r.measured <= 1e-14  # round-off only, well inside the 1e-12 tolerance


MUTANTS = [m for f in CHECK_OF for m in mutants_of("pfl_theory.pfedme", f)]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_generated_mutant_changes_the_verdict(mutant):
    with applied(mutant) as tracker:
        verdict = _verdict(CHECK_OF[mutant.function])
    if tracker.invalid:                  # rejected by the function's input validation:
        assert not (verdict is Verdict.HOLDS)   # the check errors, it does not pass silently
        return
    if tracker.hits == 0:                # never applied (argument absent or not a positive
        assert verdict is Verdict.HOLDS   # scalar ≠ 1, or no float in the result): nothing may change
        return
    if mutant.name in EQUIVALENT:
        assert verdict is Verdict.HOLDS, EQUIVALENT[mutant.name]
    else:
        assert verdict is not Verdict.HOLDS


def _patched_symbolic(name, change):
    original = getattr(pfedme, name)

    def wrong(*a, **k):
        out = dict(original(*a, **k))
        key = next(iter(out))
        out[key] = change(out[key])
        return out
    return patched("pfl_theory.pfedme", name, wrong)


@pytest.mark.parametrize("name, check_id", [
    ("theorem1a_symbolic", "pfedme.transcription_theorem1"),
    ("theorem2a_symbolic", "pfedme.transcription_theorem2")])
def test_symbolic_forms_with_a_wrong_term_fail(name, check_id):
    # the generated mutants cannot touch sympy results: a factor 2 and a dropped √ instead
    for change in (lambda e: 2 * e, lambda e: e ** 2):
        with _patched_symbolic(name, change):
            assert _verdict(check_id) is Verdict.FAILS


def test_corollary1_symbolic_with_the_other_reading_fails():
    original = pfedme.corollary1_beta_symbolic
    swapped = {"sqrt(N/T)": "sqrt(N)/T", "sqrt(N)/T": "sqrt(N/T)"}
    with patched("pfl_theory.pfedme", "corollary1_beta_symbolic",
                 lambda regime, reading="sqrt(N/T)": original(regime, swapped[reading])):
        assert _verdict("pfedme.transcription_corollaries") is Verdict.FAILS
    with patched("pfl_theory.pfedme", "corollary1_beta_symbolic",
                 lambda regime, reading="sqrt(N/T)": sp.sqrt(original(regime, reading))):
        assert _verdict("pfedme.transcription_corollaries") is Verdict.FAILS


def test_a_wrong_corollary1_regime_fails():
    original = pfedme.corollary1_beta
    with patched("pfl_theory.pfedme", "corollary1_beta",
                 lambda **k: (original(**k)[0], "ii")):
        assert _verdict("pfedme.transcription_corollaries") is Verdict.FAILS


def test_theorem_term_change_that_keeps_the_total_fails():
    # a term moved between two entries (same total) is still caught: terms compared one by one
    original = pfedme.theorem1a

    def moved(**k):
        out = original(**k)
        terms = dict(out.terms)
        terms["sampling"], terms["drift"] = terms["drift"], terms["sampling"]
        return pfedme.BoundTerms(terms, out.total, out.reference)
    with patched("pfl_theory.pfedme", "theorem1a", moved):
        assert _verdict("pfedme.transcription_theorem1") is Verdict.FAILS
