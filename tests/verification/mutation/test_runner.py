"""verification/mutation/runner.py: the catalogue's size and kinds, patching and restoring, and two
real mutants against their checks (one killed, the unmutated code leaves verdicts alone)."""

import pytest

from algorithms.methods.sam import sam
from verification.mutation import runner as mutation
from verification.mutation.catalogue import CATALOGUE, EXPLAINED_SURVIVORS, KINDS, Mutant
from verification.core.runner import load_checks


def test_catalogue_has_at_least_40_mutants_of_every_kind_with_known_checks():
    assert len(CATALOGUE) >= 40
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    assert {m.kind for m in CATALOGUE} == set(KINDS)
    checks, errors = load_checks()
    assert not errors
    for m in CATALOGUE:
        assert set(m.checks) <= set(checks), m.name
        mutation._resolve(m.target)  # every target exists
    assert set(EXPLAINED_SURVIVORS) <= {m.name for m in CATALOGUE}
    assert len(EXPLAINED_SURVIVORS) <= len(CATALOGUE) // 10  # target: >= 90% killed


def test_applied_patches_importers_and_restores():
    from verification.checks import plgu as plgu_checks

    original = sam.perturbation
    m = next(m for m in CATALOGUE if m.name == "sam.sign_flip")
    with mutation.applied(m):
        assert sam.perturbation is not original
        assert plgu_checks.perturbation is sam.perturbation  # `from algorithms.methods.sam.sam import ...`
    assert sam.perturbation is original and plgu_checks.perturbation is original
    with pytest.raises(ValueError, match="module:name"):
        mutation._resolve("algorithms.methods.sam.sam")
    with pytest.raises(ValueError, match="kind"):
        Mutant("x", "typo", "algorithms.methods.sam.sam:perturbation", lambda f: f, ("plgu.perturbation_norm",))


def test_a_killed_mutant_and_an_identity_mutant(capsys):
    killed = next(m for m in CATALOGUE if m.name == "sam.rho_x1.01")
    harmless = Mutant("identity", "constant", "algorithms.methods.sam.sam:perturbation", lambda f: f,
                      ("plgu.perturbation_norm",))
    res = mutation.run_mutants([killed, harmless], quick=True)
    assert res[0].killed and "HOLDS → FAILS" in res[0].changes[0]
    assert not res[1].killed  # an unchanged function must not "kill" anything
    assert "KILLED" in capsys.readouterr().out


def test_main_prints_kill_rate_last(capsys):
    assert mutation.main(["--quick", "--only", "cgpfl.local_gradient_1/N"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2] == "mutation kill rate: 1/1"
    # what the kill rests on: which basis killed it, out of all mutants run
    assert lines[-1].startswith("killed by claims against measurements ")
    assert "code equals our reading" in lines[-1] and "unit tests 0/1" in lines[-1]
    assert mutation.main(["--only", "no-such-mutant"]) == 2


def test_with_tests_counts_a_failing_unit_test_as_a_kill(monkeypatch):
    m = next(m for m in CATALOGUE if m.name == "cgpfl.select_k_plus1")
    assert m.tests  # the survivor of the checks names the unit test that kills it
    seen = []
    monkeypatch.setattr(mutation, "_tests_fail", lambda ids: seen.append(ids) or True)
    assert not mutation.run_mutants([m], echo=False)[0].killed  # checks alone: survives
    res = mutation.run_mutants([m], with_tests=True, echo=False)[0]
    assert res.killed and seen == [m.tests] and res.changes[0].startswith("tests fail")
    for name in EXPLAINED_SURVIVORS:  # every explained survivor has a killing unit test
        assert next(x for x in CATALOGUE if x.name == name).tests


def test_kill_basis_line_splits_measurements_identity_and_tests():
    from verification.core.registry import Check, Outcome
    from verification.mutation.runner import MutantResult, kill_basis_line

    checks = {c: Check(id=c, paper="P", reference="R", kind=k,
                       fn=lambda ctx: Outcome(0, 0, True), tolerance=None, tolerance_reason="")
              for c, k in (("a.bound", "bound"), ("t.ident", "identity"))}
    m = CATALOGUE[0]
    results = [MutantResult(m, True, ("t.ident: HOLDS → FAILS",), 0.0),
               MutantResult(m, True, ("a.bound: HOLDS → FAILS", "t.ident: HOLDS → FAILS"), 0.0),
               MutantResult(m, True, ("tests fail: x",), 0.0),
               MutantResult(m, False, (), 0.0)]
    assert kill_basis_line(results, checks).startswith(
        "killed by claims against measurements 1/4; code equals our reading 2/4; unit tests 1/4")
