"""The three CGPFL figure scripts write a PNG and a CSV at tiny (quick) sizes."""

import csv

import pytest

from paper_figures import cgpfl_accuracy_vs_k, cgpfl_convergence, cgpfl_select_k


@pytest.mark.parametrize("module", [cgpfl_select_k, cgpfl_accuracy_vs_k, cgpfl_convergence])
def test_figure_writes_png_and_csv(tmp_path, module):
    files = module.make(tmp_path, quick=True, seed=0)
    suffixes = sorted(p.suffix for p in files)
    assert suffixes == [".csv", ".png"]
    for p in files:
        assert p.exists() and p.stat().st_size > 0
    png = next(p for p in files if p.suffix == ".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.reader(open(next(p for p in files if p.suffix == ".csv"))))
    assert len(rows) >= 3  # header + data
