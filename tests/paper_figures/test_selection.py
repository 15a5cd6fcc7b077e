"""Smoke test of the selection figure (quick mode writes the PNG and the per-record CSV)."""

import csv

import pytest

from paper_figures.selection import bar_rates, make
from verification.selection.k_selectors import SELECTORS
from verification.selection.stages_linear import STAGE_SELECTORS
from verification.selection.stage_selectors import REFERENCES


def test_make_quick_writes_files(tmp_path):
    paths = make(tmp_path, quick=True, seed=0)
    assert {p.name for p in paths} == {"selection.png", "selection.csv"}
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "selection.csv").open()))
    assert {r["selector"] for r in rows if r["what"] == "K"} == set(SELECTORS)
    assert {r["selector"] for r in rows if r["what"] == "K_small_test"} == set(SELECTORS)
    assert {r["selector"] for r in rows if r["what"] == "T"} == set(STAGE_SELECTORS + REFERENCES)
    assert all(float(r["lost"]) >= -1e-12 for r in rows)


def test_bar_rates_include_the_noise_aware_rate():
    k = {"val": {"within1": 0.5, "set_within1": 0.9, "lost_le_1pt": 0.8},
         "bic": {"within1": 0.4, "set_within1": 0.7, "lost_le_1pt": 0.6}}
    bars = bar_rates(k, "K")
    assert list(bars) == ["within ±1 of best", "within ±1 of the noise-aware set",
                          "≤ 1 acc. point lost"]
    assert list(bars.values()) == [[0.5, 0.4], [0.9, 0.7], [0.8, 0.6]]
    t = {"cv": {"within1": 0.6, "within1_na": 0.8, "lost_le_1pt": 0.9}}
    assert bar_rates(t, "T")["within ±1 of the noise-aware set"] == [0.8]
    with pytest.raises(ValueError, match="what"):
        bar_rates(k, "L")
