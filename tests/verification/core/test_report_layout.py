"""The console table and report.md cut nothing (long values wrap, or ``--wide``), the table
has a tightness column, and no check's report-facing text cites internals."""

import re
from types import SimpleNamespace

from verification.core.registry import Check, Result, Verdict
from verification.core.report import format_table, report_markdown, short
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


def test_the_console_table_wraps_instead_of_cutting_and_shows_tightness():
    text = format_table(_suite())
    assert "…" not in text
    header = text.splitlines()[0].split()
    assert "tightness" in header
    row = next(line for line in text.splitlines() if line.startswith("a.bound"))
    assert " 2.5 " in row and "HOLDS" in row
    other = next(line for line in text.splitlines() if line.startswith("b.select"))
    assert "  -  " in other                                # no bound: no tightness
    assert text.count("§") == 2 * 90                       # every character is there
    assert max(len(line) for line in text.splitlines()) < 140


def test_wide_is_one_line_per_check():
    lines = format_table(_suite(), width=None).splitlines()
    # header, rule, one line per check, the sensitivity line, the summary line
    assert len(lines) == 2 + 2 + 2 and "…" not in "\n".join(lines)


def test_report_markdown_cuts_no_cell():
    md = report_markdown(_suite())
    assert "…" not in md
    assert "§" * 90 in md and ("detail " * 40).strip() in md
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
