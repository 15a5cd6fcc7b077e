"""report.md groups checks by verdict; every non-HOLDS check states claim, evidence, size."""

from verification.core.registry import Check, Result, Verdict
from verification.core.report import VERDICT_ORDER, format_table, report_markdown, summary_line
from verification.core.suite import CheckRun, SuiteRun


def _run(cid: str, verdict: Verdict, detail: str, doc: str = "") -> CheckRun:
    chk = Check(id=cid, paper="P", reference="Thm 9", kind="rate", fn=lambda ctx: None,
                tolerance=None, tolerance_reason="", quick={"rounds": 7}, full={"rounds": 70},
                description=doc)
    res = tuple(Result(chk, verdict, -0.4, -0.5, detail, 0.1, s, "quick") for s in (0, 1))
    return CheckRun(chk, verdict, res)


def test_sections_in_verdict_order_with_claim_evidence_size():
    runs = (_run("a.holds", Verdict.HOLDS, "fine"),
            _run("b.incon", Verdict.INCONCLUSIVE, "CI [-0.6, -0.4] straddles",
                 "Rate is O(1/√T).\n\nMore words."),
            _run("c.erratum", Verdict.ERRATUM, "printed p−1 misses ρ; 1/p hits it"),
            _run("d.fails", Verdict.FAILS, "lift −0.09 ± 0.02"))
    md = report_markdown(SuiteRun(runs, "quick", (0, 1)))
    heads = [line for line in md.splitlines() if line.startswith("## ")]
    assert heads == ["## FAILS (1)", "## ERRATUM (1)", "## INCONCLUSIVE (1)", "## HOLDS (1)"]
    incon = md[md.index("### `b.incon`"):md.index("## HOLDS")]
    assert "- **Claim:** Rate is O(1/√T)." in incon and "More words" not in incon
    assert "- **Evidence** (seed 0): CI [-0.6, -0.4] straddles" in incon
    assert "- **Decided at:** quick size (rounds=7); seed(s) 0, 1" in incon
    assert "- **Claim:** Thm 9" in md  # no docstring: the reference is the claim
    assert "1 HOLD, 1 FAIL, 1 ERRATUM, 1 INCONCLUSIVE, 0 ERROR" in md
    assert "| `a.holds` |" in md and "| `d.fails` |" not in md
    assert format_table(SuiteRun(runs, "quick", (0, 1))).splitlines()[-1] == \
        summary_line(SuiteRun(runs, "quick", (0, 1)).counts())
    assert VERDICT_ORDER[0] == "FAILS" and VERDICT_ORDER[-1] == "HOLDS"

