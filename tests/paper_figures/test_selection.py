"""Smoke test of the selection figure (quick mode writes the PNG and the per-record CSV)."""

import csv

from paper_figures.selection import make
from verification.selection_k import SELECTORS
from verification.selection_stages import STAGE_SELECTORS
from verification.stage_selectors import REFERENCES


def test_make_quick_writes_files(tmp_path):
    paths = make(tmp_path, quick=True, seed=0)
    assert {p.name for p in paths} == {"selection.png", "selection.csv"}
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "selection.csv").open()))
    assert {r["selector"] for r in rows if r["what"] == "K"} == set(SELECTORS)
    assert {r["selector"] for r in rows if r["what"] == "T"} == set(STAGE_SELECTORS + REFERENCES)
    assert all(float(r["lost"]) >= -1e-12 for r in rows)
