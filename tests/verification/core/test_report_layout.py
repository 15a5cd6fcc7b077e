"""The console table fits the terminal (a long value wraps onto two lines and is cut there,
saying where the whole is; ``--wide`` cuts nothing), report.md and details.md cut nothing,
the table has a tightness column and separate sensitivity / off-by columns, and no check's
report-facing text cites internals (issue 45 item 8)."""

import re
from types import SimpleNamespace

from verification.core.registry import Check, Result, Verdict
from verification.core.report import details_markdown, format_table, report_markdown, short
from verification.core.suite import CheckRun, SuiteRun

LONG = {"within1": 0.8333, "exact": 0.4167, "by_difficulty": {"easy": 1.0, "hard": 0.6667},
        "misses": [[2, 7], [2, 5], [3, 6], [4, 8], [5, 9], [6, 1]],
        "note": "a sentence much longer than any column of the console table " * 3}


def _suite() -> SuiteRun:
    runs = []
    for cid, kind, verdict, tight in (("a.bound", "bound", Verdict.HOLDS, 2.5),
                                      ("b.select", "selection", Verdict.HOLDS, None)):
        chk = Check(id=cid, paper="P", reference="Thm 1", kind=kind, fn=lambda ctx: None,
                    tolerance=None, tolerance_reason="", description="A claim.")
        res = (Result(chk, verdict, LONG, {"bound": "§" * 90}, "detail " * 40, 0.1, 0,
                      "quick", tightness=tight),)
        runs.append(CheckRun(chk, verdict, res))
    return SuiteRun(tuple(runs), "quick", (0,))


def test_the_console_table_keeps_two_lines_a_cell_and_shows_tightness():
    text = format_table(_suite())
    header = text.splitlines()[0].split()
    assert "tightness" in header
    row = next(line for line in text.splitlines() if line.startswith("a.bound"))
    assert " 2.5 " in row and "HOLDS" in row
    other = next(line for line in text.splitlines() if line.startswith("b.select"))
    assert "  -  " in other                                # no bound: no tightness
    lines = text.splitlines()
    # header, rule, two lines per check, the "cut here" line, sensitivity, summary
    assert len(lines) == 2 + 2 * 2 + 3
    assert "report.md and results.json hold every value" in text
    assert sum(ln.count("…") for ln in lines[2:6]) == 4    # both value cells of both checks
    assert max(len(line) for line in lines) < 140


def test_the_table_fits_the_terminal_it_is_given():
    for columns in (100, 160):
        lines = format_table(_suite(), terminal=columns).splitlines()
        assert max(len(line) for line in lines[:6]) <= columns
    assert len(format_table(_suite(), terminal=100, max_lines=5).splitlines()) == 2 + 2 * 5 + 3


def test_sensitivity_and_distance_from_holding_are_two_columns():
    suite = _suite()
    fails = suite.runs[0]
    failed = CheckRun(fails.check, Verdict.FAILS, (Result(
        fails.check, Verdict.FAILS, 1.0, 2.0, "", 0.1, 0, "quick", sensitivity=3.0),))
    held = CheckRun(fails.check, Verdict.HOLDS, (Result(
        fails.check, Verdict.HOLDS, 1.0, 2.0, "", 0.1, 0, "quick", sensitivity=4.0),))
    header, _, row_f = format_table(SuiteRun((failed,), "quick", (0,))).splitlines()[:3]
    *_, row_h = format_table(SuiteRun((held,), "quick", (0,))).splitlines()[:3]
    cols = header.split()
    assert cols[-3:] == ["sens.", "off", "by"] or cols[-4:-1] == ["sens.", "off", "by"]
    at = header.index("sens."), header.index("off by")
    assert row_f[at[0]:at[1]].strip() == "-" and row_f[at[1]:].split()[0] == "×3"
    assert row_h[at[0]:at[1]].strip() == "×4" and row_h[at[1]:].split()[0] == "-"


def test_wide_is_one_line_per_check():
    lines = format_table(_suite(), width=None).splitlines()
    # header, rule, one line per check, the sensitivity line, the summary line
    assert len(lines) == 2 + 2 + 2 and "…" not in "\n".join(lines)


def test_report_and_details_cut_no_cell_and_report_md_stays_short():
    suite = _suite()
    md, details = report_markdown(suite), details_markdown(suite)
    assert "…" not in md + details
    assert "§" * 90 in details and ("detail " * 40).strip() in details
    assert "§" not in md and "[details.md](details.md)" in md
    assert "+2 more" in short([1, 2, 3, 4, 5, 6], None)


def test_no_registered_check_cites_internals_in_the_report():
    """The claim (docstring's first paragraph), reference and tolerance reason of every
    check are user-facing: no module paths, Sphinx roles, private names or issue numbers."""
    from verification.core.registry import load_all
    from verification.core.report import _claim

    internal = re.compile(r"\b(verification|pfl_theory|algorithms|paper_figures|synthetic|"
                          r"pflt)\.[a-z_]+|:(func|mod|class|data|meth):|\bissue \d+|"
                          r"(?<![\w`])_[a-z][a-z_]+\b")
    found = []
    for cid, chk in load_all().items():
        for what, text in (("claim", _claim(SimpleNamespace(check=chk))),
                           ("reference", chk.reference), ("tolerance", chk.tolerance_reason)):
            m = internal.search(text or "")
            if m:
                found.append(f"{cid} {what}: …{text[max(0, m.start() - 20):m.end() + 20]}…")
    assert not found, "\n".join(found)
