"""Smoke test of the PPFE linear figures (quick mode writes every PNG + CSV)."""

import csv

from paper_figures.ppfe_linear import make


def test_make_quick_writes_files(tmp_path):
    paths = make(tmp_path, quick=True, seed=1)
    names = {p.name for p in paths}
    for stem in ("ppfe_mse_vs_n", "ppfe_mse_vs_alpha", "ppfe_stages", "ppfe_bound_terms"):
        assert {stem + ".png", stem + ".csv"} <= names
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "ppfe_mse_vs_alpha.csv").open()))
    assert {r["method"] for r in rows} == {"PPFE", "Local", "FedAvg"}
    assert any(r["alpha"] == "U(0,1)" for r in rows)
    assert all(float(r["mean_mse"]) > 0 for r in rows)
