"""paper_figures/ppfe_nn.py: the Theorem 7 side next to the measured per-stage gap."""

import csv

import pytest

from paper_figures import ppfe_nn
from pfl_theory.ppfe_bounds import theorem7_terms


def _fake_rows(ends):
    rows = []
    for t, end in enumerate(ends):
        rows.append({"method": "PPFE stage model", "round": end, "stage": t, "accuracy": 0.5,
                     "comm_params": 0.0, "test_loss": 1.0 + 0.3 * t, "train_loss": 0.9})
        rows.append({"method": "fedrep", "round": end, "stage": "", "accuracy": 0.4,
                     "comm_params": 0.0})
    return rows


def test_gap_rows_pair_the_measured_gap_with_theorem7_per_stage(tmp_path):
    ends = [8, 20, 30, 40]
    gaps = ppfe_nn.gap_rows(_fake_rows(ends), ends, quick=True, seed=0)
    assert [g["stage"] for g in gaps] == [0, 1, 2, 3]
    assert [g["measured_gap"] for g in gaps] == pytest.approx([0.1, 0.4, 0.7, 1.0])
    fed, model, _, _ = ppfe_nn.setting(quick=True, seed=0)
    sizes = [int(c) for c in fed.train.counts]
    expected = theorem7_terms([list(model.widths)] * 3, sizes=sizes, delta=ppfe_nn.DELTA)
    assert gaps[2]["bound_total"] == pytest.approx(expected["total"])
    # Theorem 7 grows with the number of stages (personalized and boosting terms)
    totals = [g["bound_total"] for g in gaps]
    assert totals == sorted(totals) and gaps[0]["bound_personalized"] == 0.0
    files = ppfe_nn._gap_figure(tmp_path, gaps)
    assert {p.suffix for p in files} == {".png", ".csv"}
    rows = list(csv.DictReader(open(tmp_path / "ppfe_nn_gap.csv")))
    assert len(rows) == 4 and "measured_gap" in rows[0] and "bound_total" in rows[0]
