"""Running generated mutants (verification/mutation/generated_run.py): the probe finds the
checks that call a formula, a mutant that moves the formula past a check's margin is killed,
one that cannot is not, and the kill-rate bookkeeping."""

from __future__ import annotations

from pfl_theory import ppfe
from verification.core.registry import Check, Outcome
from verification.mutation import generated as G
from verification.mutation import generated_run as R


KW = dict(width=2.0, depth=1, num_stages=2, n=40, num_clients=10, gamma_w=1.0, delta=0.05)
#: the unmutated value (this tests the mutation machinery, not the formula)
UNMUTATED = ppfe.corollary2_terms(**KW)["total"]


def _fake_checks():
    def tight(ctx):  # a fake identity check pinned to the unmutated value
        value = ppfe.corollary2_terms(**KW)["total"]
        return Outcome(value, UNMUTATED, abs(value / UNMUTATED - 1) < 1e-6)

    def unrelated(ctx):
        return Outcome(1.0, 1.0, True)

    mk = lambda cid, fn: Check(id=cid, paper="P", reference="R", kind="identity", fn=fn,
                               tolerance=1e-6, tolerance_reason="float64")
    return {"fake.tight": mk("fake.tight", tight), "fake.unrelated": mk("fake.unrelated",
                                                                        unrelated)}


def test_probe_maps_formulas_to_the_checks_that_call_them():
    users, baseline = R.probe(_fake_checks(), [("pfl_theory.ppfe_bounds", "corollary2_terms"),
                                              ("pfl_theory.ppfe_bounds", "theorem7_terms")])
    assert users == {("pfl_theory.ppfe_bounds", "corollary2_terms"): ["fake.tight"]}
    assert baseline["fake.tight"].value == "HOLDS"


def test_run_generated_kills_what_moves_the_formula(monkeypatch):
    monkeypatch.setattr(R, "formula_functions",
                        lambda: [("pfl_theory.ppfe_bounds", "corollary2_terms")])
    results, unchecked, users = R.run_generated(_fake_checks(), limit=6, echo=False)
    assert unchecked == [] and len(results) == 6
    by_label = {r.mutant.label: r for r in results}
    assert by_label["x2"].killed and by_label["x0.5"].killed
    assert all("fake.tight (identity): HOLDS → FAILS" in r.changes[0]
               for r in results if r.killed)
    rates = R.kill_rates(results, _fake_checks(), users)
    assert rates["check kind"]["identity"][1] == sum(r.exercised for r in results)


def test_kill_rates_per_mutant_kind_and_check_kind():
    chk = {c: Check(id=c, paper="P", reference="R", kind=k, fn=lambda ctx: Outcome(0, 0, True),
                    tolerance=None, tolerance_reason="")
           for c, k in (("a", "bound"), ("b", "envelope"))}
    users = {("m", "f"): ["a", "b"]}

    def res(kind, changes, exercised=True):
        m = G.GeneratedMutant("m", "f", kind, kind, lambda f, t: f)
        return R.GeneratedResult(m, exercised, tuple(changes), 0.0)

    results = [res("constant", ["b (envelope): FAILS → HOLDS"]),
               res("constant", []),
               res("exponent", ["a (bound): VACUOUS → HOLDS"]),
               res("swapped", ["a (bound): HOLDS → FAILS"], exercised=False)]
    rates = R.kill_rates(results, chk, users)
    assert rates["mutant kind"] == {"constant": (1, 2), "exponent": (1, 1)}
    assert rates["check kind"] == {"bound": (1, 3), "envelope": (1, 3)}
    assert rates["all"]["all"] == (2, 3)
    assert rates["all"]["all, not counting VACUOUS → HOLDS alone"] == (1, 3)
    assert any("constant 1/2 (50%)" in line for line in R.format_rates(rates))


def test_kill_rates_say_what_they_rest_on():
    chk = {c: Check(id=c, paper="P", reference="R", kind=k, fn=lambda ctx: Outcome(0, 0, True),
                    tolerance=None, tolerance_reason="")
           for c, k in (("a", "bound"), ("t", "identity"))}
    users = {("m", "f"): ["a", "t"]}

    def res(changes):
        m = G.GeneratedMutant("m", "f", "constant", "c", lambda f, t: f)
        return R.GeneratedResult(m, True, tuple(changes), 0.0)

    results = [res(["t (identity): HOLDS → FAILS"]),
               res(["t (identity): HOLDS → FAILS", "a (bound): HOLDS → FAILS"]),
               res(["t (identity): HOLDS → FAILS"]), res([])]
    rates = R.kill_rates(results, chk, users)
    assert rates["basis"] == {"claims against measurements": (1, 4),
                              "code equals our reading": (3, 4)}
    line = next(x for x in R.format_rates(rates) if x.startswith("killed, of all"))
    assert "claims against measurements 1/4 (25%)" in line
    assert "code equals our reading 3/4 (75%)" in line and "our own reading" in line


def test_a_check_subset_is_probed_alone_and_the_rates_are_written(monkeypatch, tmp_path):
    import json

    from verification.mutation import runner

    monkeypatch.setattr(R, "formula_functions",
                        lambda: [("pfl_theory.ppfe_bounds", "corollary2_terms")])
    results, _, users = R.run_generated(_fake_checks(), limit=2, echo=False,
                                        pool_only="fake.unrelated")
    assert users == {} and results == []            # the tight check was not in the pool
    results, _, users = R.run_generated(_fake_checks(), limit=2, echo=False,
                                        pool_only="fake.t*, other")
    assert users and all(r.killed for r in results)
    out = tmp_path / "rates.json"
    runner.write_rates(str(out), R.kill_rates(results, _fake_checks(), users), only=None,
                       seconds=1.0, checks="fake.t*", commit="abc")
    data = json.loads(out.read_text())
    assert data["checks"] == "fake.t*" and data["commit"] == "abc"
    assert data["rates"]["basis"]["code equals our reading"] == [2, 2]
    assert "worst_case" in G.PROBE_KINDS     # the exact worst cases count as measurements
