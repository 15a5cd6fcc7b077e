"""The worst-case figures (paper_figures/worst_case.py) at tiny sizes: files and contents."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("PEPit")

from paper_figures import worst_case  # noqa: E402
from verification.worst_case import problems as P  # noqa: E402


def test_make_tiny(tmp_path, monkeypatch):
    monkeypatch.setitem(worst_case.SIZES, "quick",
                        {"exact_T": 1, "unrolled": 3, "steps": 3, "thm2_T": 1, "horizon": 1,
                         "cgpfl_T": 2, "cgpfl_steps": 2})
    monkeypatch.setattr(P, "largest_contracting_step", lambda s, **kw: 2.0)  # tested elsewhere
    paths = worst_case.make(tmp_path, quick=True, seed=0)
    assert {p.suffix for p in paths} == {".png", ".csv"} and len(paths) == 10
    rows = list(csv.DictReader((tmp_path / "worst_case_thm1.csv").open()))
    for r in rows:                       # measured <= valid worst case <= bound where both exist
        if r["pep_unrolled"]:
            assert float(r["measured"]) <= float(r["pep_unrolled"]) <= float(r["bound"])
    rho = list(csv.DictReader((tmp_path / "worst_case_rho.csv").open()))
    assert float(rho[0]["rho"]) < 1 < float(rho[-1]["rho"])   # η̂/10 contracts, 1.5·2 = 3 not
    cg = list(csv.DictReader((tmp_path / "worst_case_cgpfl.csv").open()))
    for r in cg:                         # engine <= exact worst case <= Theorem 4.1 (Q = I)
        assert float(r["measured"]) <= 1.02 * float(r["pep"]) <= float(r["bound"])
    step = list(csv.DictReader((tmp_path / "worst_case_cgpfl_step.csv").open()))
    assert 0.99 < float(step[0]["constant"]) < 1.1    # β = β_max/4: the exact constant ~1, not 4
