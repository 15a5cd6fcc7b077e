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


def test_convergence_quick_figure_does_not_state_a_verdict(tmp_path):
    files = cgpfl_convergence.make(tmp_path, quick=True, seed=0)
    rows = list(csv.DictReader(open(next(p for p in files if p.suffix == ".csv"))))
    verdicts = {r["verdict"] for r in rows if r["panel"] == "grad"}
    assert verdicts <= {"NOT TESTED", "descriptive"}
    assert not verdicts & {"FAILS", "REFUTED", "HOLDS"}


def test_convergence_claim_verdict_uses_the_tail_and_the_three_way_rule():
    import numpy as np

    ts = [4, 8, 16, 32, 64, 128]
    x = np.asarray(ts, dtype=float)
    # early points flat (re-clustering), tail decaying as T^-1: the claim holds on the tail
    steep = np.vstack([np.where(x >= 16, x ** -1.0 * 16, 1.0) * (1 + 0.01 * s)
                       for s in range(3)])
    assert cgpfl_convergence.claim_verdict(ts, steep, quick=False)[0] == "HOLDS"
    # mutation: a tail decaying only as T^-0.1 refutes the claim
    slow = np.vstack([x ** -0.1 * (1 + 0.01 * s) for s in range(3)])
    assert cgpfl_convergence.claim_verdict(ts, slow, quick=False)[0] == "FAILS"
    assert cgpfl_convergence.claim_verdict(ts, slow, quick=True)[0] == "NOT TESTED"
    assert cgpfl_convergence.claim_verdict([2, 3, 4], slow[:, :3], quick=False)[0] == "NOT TESTED"
