"""verification/checks/reproduction_cgpfl.py: each verdict of cgpfl.table1_fmnist_ordering
occurs, on synthetic CSVs in the reproduction's format."""

from __future__ import annotations

import csv

import pytest

from verification.checks.reproduction_cgpfl import CSV, table1_fmnist_ordering
from verification.core.registry import Context, Verdict, load_all, run_check
from verification.experiments.reproduction_run import FIELDS


def write_csv(path, values: dict):
    """``values``: {method: [fraction per seed]} on both FMNIST columns."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for col, model in (("fmnist_mlr", "mlr"), ("fmnist_dnn", "dnn")):
            for method, vals in values.items():
                for seed, v in enumerate(vals):
                    w.writerow(dict(method=method, model=model, column=col, seed=seed,
                                    metric="personalized_accuracy", value=v, best_value=v,
                                    rounds=200, status="ok", command=f"c {method} {col} {seed}"))
    return path


def verdict(path):
    chk = load_all()["cgpfl.table1_fmnist_ordering"]
    res = run_check(chk.__class__(**{**chk.__dict__, "quick": {"csv": str(path)}}))
    return res.verdict, res.detail


HIGH, LOW, NOISY = [0.95, 0.951, 0.952], [0.85, 0.851, 0.852], [0.80, 0.99, 0.90]


@pytest.mark.parametrize("values, expected", [
    ({"CGPFL (K=4)": HIGH, "CGPFL-Heur": HIGH, "FedAvg": LOW, "pFedMe (PM)": LOW}, Verdict.HOLDS),
    # one claim reversed (pFedMe above CGPFL-Heur): the worst claim decides
    ({"CGPFL (K=4)": HIGH, "CGPFL-Heur": LOW, "FedAvg": LOW[:1] * 0 + [0.7, 0.71, 0.72],
      "pFedMe (PM)": HIGH}, Verdict.FAILS),
    ({"CGPFL (K=4)": NOISY, "CGPFL-Heur": HIGH, "FedAvg": LOW, "pFedMe (PM)": LOW},
     Verdict.INCONCLUSIVE),
    ({"Ditto": HIGH}, Verdict.NOT_RUN),
])
def test_each_verdict_occurs(tmp_path, values, expected):
    # mutations caught: claims not read from the CSV (always HOLDS), worst() replaced by the
    # best verdict, NOT RUN on a CSV without the claims' methods
    v, detail = verdict(write_csv(tmp_path / "t.csv", values))
    assert v is expected, detail


def test_absent_csv_is_not_run_with_one_line_why(tmp_path):
    out = table1_fmnist_ordering(Context("quick", 0, {"csv": str(tmp_path / "none.csv")}, None))
    assert out.verdict is Verdict.NOT_RUN
    assert out.detail.startswith("NOT RUN: none.csv absent") and "\n" not in out.detail


def test_default_csv_is_the_reproductions():
    assert CSV.name == "cgpfl_table1_fmnist.csv" and CSV.parent.name == "results"


def test_other_rounds_are_not_mixed_in(tmp_path):
    # a short run (T = 50) where CGPFL is far below: the judged T is the one with the most
    # rows (200), so the claims still HOLD; mutation caught: every T averaged together
    path = write_csv(tmp_path / "t.csv", {"CGPFL (K=4)": HIGH, "CGPFL-Heur": HIGH,
                                          "FedAvg": LOW, "pFedMe (PM)": LOW})
    with path.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        for seed in range(2):
            w.writerow(dict(method="CGPFL (K=4)", model="mlr", column="fmnist_mlr", seed=seed,
                            metric="personalized_accuracy", value=0.1, best_value=0.1,
                            rounds=50, status="ok", command=f"short {seed}"))
    assert verdict(path)[0] is Verdict.HOLDS
