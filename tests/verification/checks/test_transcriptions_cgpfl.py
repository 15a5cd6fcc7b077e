"""The CGPFL transcription checks: each HOLDS on the real pfl_theory.cgpfl, and each is
made to FAIL by the generated formula mutants of the functions it covers (all of them,
except the ones named below with the reason they cannot change the value)."""

from __future__ import annotations


import numpy as np
import pytest

from pfl_theory import cgpfl
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, mutants_of, patched

CHECK_OF = {
    "theorem41_bound": "cgpfl.transcription_theorem41",
    "alpha_hat0": "cgpfl.transcription_theorem41",
    "theorem41_stepwise": "cgpfl.transcription_theorem41",
    "beta_max": "cgpfl.transcription_theorem41",
    "theorem42_bound": "cgpfl.transcription_theorem42",
    "complexity_term": "cgpfl.transcription_theorem42",
    "e_of_k": "cgpfl.transcription_theorem42",
    "weighted_discrepancy": "cgpfl.transcription_theorem42",
    "cost": "cgpfl.transcription_lower_level",
    "lower_level_objective": "cgpfl.transcription_lower_level",
    "cluster_means": "cgpfl.transcription_lower_level",
    "local_model_gradient": "cgpfl.transcription_lower_level",
    "select_k": "cgpfl.transcription_select_k",
}
#: mutants that provably leave the value unchanged, with the reason (none found)
EQUIVALENT: dict[str, str] = {}
CHECKS = load_all()


def _verdict(check_id: str) -> Verdict:
    with np.errstate(all="ignore"):
        return run_check(CHECKS[check_id], size="quick", seed=0).verdict


def test_every_public_cgpfl_formula_is_covered():
    from verification.mutation.generated import formula_functions
    assert {f for m, f in formula_functions() if m == "pfl_theory.cgpfl"} == set(CHECK_OF)


@pytest.mark.parametrize("check_id", sorted(set(CHECK_OF.values())))
@pytest.mark.parametrize("seed", [0, 7])
def test_check_holds(check_id, seed):
    r = run_check(CHECKS[check_id], size="quick", seed=seed)
    assert r.verdict is Verdict.HOLDS, r.detail
    assert r.measured <= 1e-14  # round-off only, well inside the 1e-12 tolerance


MUTANTS = [m for f in CHECK_OF for m in mutants_of("pfl_theory.cgpfl", f)]


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


def test_every_entry_of_alpha_hat0_binds_at_some_quick_point():
    # otherwise a wrong non-binding entry could not change theorem41_bound
    r = run_check(CHECKS["cgpfl.transcription_theorem41"], size="quick", seed=0)
    assert min(r.extra["alpha_hat0_binding_entry_counts"]) >= 3


def test_select_k_points_cover_every_k_hat_and_a_wrong_choice_fails():
    import dataclasses

    original = cgpfl.select_k
    seen = set()

    def spy(*a, **k):
        out = original(*a, **k)
        seen.add(out.k_hat)
        return out
    with patched("pfl_theory.cgpfl", "select_k", spy):
        assert _verdict("cgpfl.transcription_select_k") is Verdict.HOLDS
    assert len(seen) >= 2  # the points do not all select the same K
    def wrong_k(*a, **k):  # K̂ moved to the next K of the grid (cyclically)
        out = original(*a, **k)
        return dataclasses.replace(out, k_hat=int(out.k_hat % out.ks[-1] + 1))
    with patched("pfl_theory.cgpfl", "select_k", wrong_k):
        assert _verdict("cgpfl.transcription_select_k") is Verdict.FAILS


def test_a_suboptimal_clustering_cost_fails():
    # K-means stopped at a local optimum: cost(K) above the exact optimum by 0.1%
    import dataclasses

    original = cgpfl.select_k
    with patched("pfl_theory.cgpfl", "select_k", lambda *a, **k: dataclasses.replace(
            original(*a, **k), costs=original(*a, **k).costs * 1.001)):
        assert _verdict("cgpfl.transcription_select_k") is Verdict.FAILS


def test_a_wrong_gradient_sign_fails():
    original = cgpfl.local_model_gradient
    with patched("pfl_theory.cgpfl", "local_model_gradient", lambda *a, **k: -original(*a, **k)):
        assert _verdict("cgpfl.transcription_lower_level") is Verdict.FAILS
