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


def test_gap_figure_shows_measurement_and_bound(tmp_path):
    from paper_figures.ppfe_linear import theorem7_linear

    make(tmp_path, quick=True, seed=1)
    rows = list(csv.DictReader((tmp_path / "ppfe_gap_vs_n.csv").open()))
    assert [int(r["N"]) for r in rows] == [10, 20, 40, 80]      # >= 4 N: a slope to read
    for r in rows:
        assert float(r["measured_gap_mean"]) >= 0
        assert float(r["bound_total"]) == theorem7_linear(50, 4, 40, int(r["N"]))["total"]
    # the shared term scales as N^{-1/2}, the rest does not depend on N
    a, b = theorem7_linear(50, 4, 40, 10), theorem7_linear(50, 4, 40, 40)
    assert a["shared"] / b["shared"] == __import__("pytest").approx(2.0)
    assert a["personalized"] == b["personalized"] and a["boosting"] == b["boosting"]
