"""Cells and lines that say what a number rests on (verification/core/report_cells.py): the
worst-case columns and the solver tolerance, the vacuous bound's certificate line, the
distance from holding under a FAILS."""

from verification.core.registry import Check, Result, Verdict
from verification.core.report import details_markdown, format_table, report_markdown
from verification.core.suite import CheckRun, SuiteRun


def _run(cid: str, verdict: Verdict, detail: str) -> CheckRun:
    chk = Check(id=cid, paper="P", reference="Thm 9", kind="rate", fn=lambda ctx: None,
                tolerance=None, tolerance_reason="", quick={"rounds": 7}, full={"rounds": 70})
    res = tuple(Result(chk, verdict, -0.4, -0.5, detail, 0.1, s, "quick") for s in (0, 1))
    return CheckRun(chk, verdict, res)


def _worst_case_run(worst: float, bound: float = 1012.0):
    from verification.core.registry import Check, run_check
    from verification.worst_case.outcome import worst_case_outcome

    chk = Check(id="w.thm", paper="P", reference="Thm 2", kind="worst_case",
                fn=lambda ctx: worst_case_outcome(measured=900.0, worst=worst, bound=bound,
                                                  exact=True, rel_tol=ctx.tolerance),
                tolerance=0.02, tolerance_reason="solver")
    res = run_check(chk)
    return CheckRun(chk, res.verdict, (res,))


def test_worst_case_columns_are_named_and_solver_tolerance_is_said():
    within = _worst_case_run(1013.0)          # 0.1% above the bound: HOLDS by the 2% tolerance
    assert within.verdict is Verdict.HOLDS
    table = format_table(SuiteRun((within,), "quick", (0,))).splitlines()
    assert table[0].split()[:6] == ["id", "kind", "R", "engine", "worst", "case"]
    assert "bound" in table[0] and "measured" not in table[0]
    text = "\n".join(table)
    assert "1013 = bound within solver" in text and "tolerance (2%)" in text
    md = details_markdown(SuiteRun((within,), "quick", (0,)))    # a HOLDS: in details.md
    assert "worst case 1013 = bound within solver tolerance (2%) (engine 900)" in md
    # 3% above: beyond the tolerance, a counterexample, printed as the plain number
    above = _worst_case_run(1042.0)
    assert above.verdict is Verdict.FAILS
    assert "solver tolerance" not in format_table(SuiteRun((above,), "quick", (0,)))
    below = _worst_case_run(1000.0)
    assert "solver tolerance" not in format_table(SuiteRun((below,), "quick", (0,)))


def test_fails_explained_with_distance_from_holding_not_sensitivity():
    runs = (_run("d.fails", Verdict.FAILS, "lift −0.09 ± 0.02"),)
    md = report_markdown(SuiteRun(runs, "quick", (0,)))
    assert "- **Distance from holding:**" in md and "- **Sensitivity:**" not in md


def test_vacuous_bound_prints_bound_trivial_certificate_measured_side_by_side():
    import json

    from verification.core.registry import Check, bound_outcome, run_check
    from verification.core.report import results_dict
    from verification.core.tightness import tightness_markdown

    def vacuous(ctx):
        out = bound_outcome(0.06, 163.0, trivial=9.07)
        cert = {"value": 0.41, "name": "held-out kl bound", "delta": 0.05}
        return out.__class__(**{**out.__dict__, "extra": {**out.extra, "certificate": cert}})

    chk = Check(id="v.thm", paper="P", reference="Thm 4.1", kind="bound", fn=vacuous,
                tolerance=None, tolerance_reason="")
    res = run_check(chk)
    suite = SuiteRun((CheckRun(chk, res.verdict, (res,)),), "quick", (0,))
    md = report_markdown(suite)
    assert ("- **Bound / trivial / certificate / measured:** 163 / 9.07 / 0.41 "
            "(held-out kl bound, δ = 0.05) / 0.06") in md
    assert "| 0.41 (δ = 0.05) | **VACUOUS** |" in "\n".join(tightness_markdown(suite))
    data = json.loads(json.dumps(results_dict(suite)))
    assert data["checks"][0]["results"][0]["certificate"] == {
        "value": 0.41, "name": "held-out kl bound", "delta": 0.05}
    # without one, the record says so (never a silently missing key)
    plain = run_check(Check(id="v.bare", paper="P", reference="T", kind="bound",
                            fn=lambda ctx: bound_outcome(0.06, 163.0, trivial=9.07),
                            tolerance=None, tolerance_reason=""))
    assert plain.to_dict()["certificate"]["name"] == "none computed by this check"


def test_a_tiny_solver_tolerance_is_printed_with_its_digits():
    from verification.core.registry import Check, run_check
    from verification.core.report_cells import worst_case_cells
    from verification.worst_case.outcome import worst_case_outcome

    chk = Check(id="w.tiny", paper="P", reference="T", kind="worst_case",
                fn=lambda ctx: worst_case_outcome(measured=0.1, worst=10.0 + 1e-7, bound=10.0,
                                                  exact=True, rel_tol=ctx.tolerance),
                tolerance=1e-6, tolerance_reason="solver")
    res = run_check(chk)
    cells = worst_case_cells(CheckRun(chk, res.verdict, (res,)))
    assert cells == ("0.1", "10 = bound within solver tolerance (0.0001%)", "10")
