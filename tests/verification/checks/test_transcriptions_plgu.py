"""The PLGU transcription checks (verification/checks/transcriptions_plgu.py): every check
HOLDS (two seeds, both sizes), and every generated mutant of every pfl_theory.plgu function
(verification.mutation.generated, all of them, not only the 8 the mutation run draws)
makes its check FAIL, except the provably equivalent ones named below."""

from __future__ import annotations


import pytest

from pfl_theory import plgu
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, mutants_of

#: pfl_theory.plgu function → the transcription check that compares it
CHECK_OF = {
    "clipped_log": "clipped_log_lp_factor", "lp_factor": "clipped_log_lp_factor",
    "lemma2_margin_complexity": "lemma2", "lemma3_adversarial_complexity": "lemma3",
    "lemma4_personalized_complexity": "lemma4", "theorem1_plgu_lf": "theorem1",
    "theorem2_plgu_grep": "theorem2", "theorem3_plgu_ghn": "theorem3",
    "linear_rademacher_bound": "linear_rademacher_bound",
    "empirical_rademacher_linear": "empirical_rademacher",
}
#: mutants that cannot change any value: why
EQUIVALENT = {
    "plgu.lemma3_adversarial_complexity:B<->rho": "B and ρ enter Lemma 3 only as B + ρ",
    "plgu.theorem3_plgu_ghn:beta<->beta_v": "β and β_v enter Theorem 3 only as β β_v",
    "plgu.linear_rademacher_bound:B<->M": "B M is symmetric",
    "plgu.empirical_rademacher_linear:seed=1": "another seed of the Monte-Carlo draws, not a "
                                               "formula error: still within its sampling error",
}


def _checks():
    return {cid: c for cid, c in load_all().items() if cid.startswith("plgu.transcription_")}


def test_every_plgu_function_has_a_transcription_check():
    from verification.mutation.generated import formula_functions

    names = {f for m, f in formula_functions() if m == "pfl_theory.plgu"}
    assert names == set(CHECK_OF)
    assert {f"plgu.transcription_{v}" for v in CHECK_OF.values()} == set(_checks())


@pytest.mark.parametrize("size,seed", [("quick", 0), ("quick", 3), ("full", 1)])
def test_every_check_holds(size, seed):
    for cid, chk in _checks().items():
        r = run_check(chk, size=size, seed=seed)
        assert r.verdict is Verdict.HOLDS, f"{cid}: {r.detail}"
        assert r.measured <= chk.tolerance


@pytest.mark.parametrize("function", sorted(CHECK_OF))
def test_every_generated_mutant_fails_its_check(function):
    chk = _checks()[f"plgu.transcription_{CHECK_OF[function]}"]
    survived, killed = [], 0
    for mutant in mutants_of("pfl_theory.plgu", function, limit=10_000):
        with applied(mutant) as tracker:
            verdict = run_check(chk, size="quick", seed=0).verdict
        if not tracker.hits or tracker.invalid:
            continue  # not exercised (a list argument, or a value the function rejects)
        if verdict is Verdict.HOLDS:
            survived.append(mutant.name)
        else:
            killed += 1
    assert killed > 0
    assert sorted(survived) == sorted(k for k in EQUIVALENT
                                      if k.split(":")[0] == f"plgu.{function}")


def test_a_doubled_result_fails_and_is_reported(monkeypatch):
    original = plgu.theorem1_plgu_lf
    monkeypatch.setattr(plgu, "theorem1_plgu_lf", lambda **k: type(original(**k))(
        {n: 2 * v for n, v in original(**k).terms.items()}, 2 * original(**k).total))
    r = run_check(_checks()["plgu.transcription_theorem1"], size="quick", seed=0)
    assert r.verdict is Verdict.FAILS and r.measured == pytest.approx(0.5)


def test_pflt_verify_only_finds_each_transcription_check_by_its_id():
    """Every check declares its literal id, so ``pflt verify --only <id>`` (which reads the
    ids from the source without importing) imports its module."""
    from verification.core.runner import modules_declaring

    for cid in load_all():
        if ".transcription_" in cid and cid.split(".")[0] in ("plgu", "ppfe"):
            assert load_all()[cid].fn.__module__.rsplit(".", 1)[-1] in \
                modules_declaring("verification.checks", cid), cid
