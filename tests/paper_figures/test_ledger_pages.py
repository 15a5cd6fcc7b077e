"""paper_figures.ledger_pages: the ledger's docs pages and the README's coverage table are
generated from the ledger and stay fresh (issue 42)."""

from __future__ import annotations

from pathlib import Path

from paper_figures import ledger_pages
from verification.ledger import PAPERS, STATUSES, coverage, ledger

ROOT = Path(__file__).resolve().parents[2]


def test_the_pages_are_fresh_and_in_the_nav():
    assert ledger_pages.main(["--check"]) == 0, "python -m paper_figures.ledger_pages"
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in ledger_pages.render():
        assert str(page.relative_to("docs")) in nav, page


def test_a_page_lists_its_paper_s_items_in_order_with_status_and_command():
    pages = ledger_pages.render()
    text = pages[ledger_pages.PAGES_DIR / "pfedme.md"]
    entries = [e for e in ledger() if e.item.paper == "pfedme"]
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "**" in ln]
    assert len(rows) == len(entries)
    for row, e in zip(rows, entries):
        assert row.startswith(f"| {e.item.label}") and f"**{e.status}**" in row
        assert not e.command or e.command in row.replace("\\|", "|")


def test_the_coverage_block_counts_what_the_ledger_says():
    block = ledger_pages.coverage_block()
    cov = coverage(ledger())
    from verification.core.papers import short_name

    for pid in PAPERS:
        line = next(ln for ln in block.splitlines() if ln.startswith(f"| {short_name(pid)} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert int(cells[1]) == sum(cov[pid].values())
        assert [int(c) for c in cells[2:]] == [cov[pid][s] for s in STATUSES]
    assert "verify_quick.json" in block
