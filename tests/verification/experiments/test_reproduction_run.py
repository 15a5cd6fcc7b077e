"""verification/experiments/reproduction_run.py: the CSV (atomic, one row per command),
which cells are pending, a failed cell's one-line reason."""

from __future__ import annotations

import json
import os
import signal

import pytest

from verification.experiments.reproduction import cells
from verification.experiments.reproduction_run import (FIELDS, collect, failure_reason,
                                                       pending, put_row, read_rows, run_cells)
from verification.experiments.reproductions import get_reproduction

REP = get_reproduction("cgpfl_table1_fmnist")


def _cells(seeds=(0, 1)):
    return cells(REP, seeds=seeds, rounds=2, columns=["fmnist_mlr"], methods=["FedAvg"])


def test_failed_rows_are_pending_and_replaced_not_appended(tmp_path):
    # mutations caught (issue 43.1): a failed cell skipped as done on the next invocation;
    # its re-run appended beside the failed row (two rows, one command)
    csv_path, runs = tmp_path / "t.csv", tmp_path / "runs"
    cs = _cells()
    outs = [str(runs / c.reproduction / c.run_name) for c in cs]
    put_row(csv_path, dict(method="FedAvg", model="mlr", seed=0, metric="m", value="0.5",
                           command=cs[0].command(None, outs[0]), status="ok"))
    put_row(csv_path, dict(method="FedAvg", model="mlr", seed=1, metric="m", value="nan",
                           command=cs[1].command(None, outs[1]), status="exit 2", reason="x"))
    assert [c.seed for c, _ in pending(cs, csv_path, runs)] == [1]
    assert [c.seed for c, _ in pending(cs, csv_path, runs, force=True)] == [0, 1]
    put_row(csv_path, dict(method="FedAvg", model="mlr", seed=1, metric="m", value="0.6",
                           command=cs[1].command(None, outs[1]), status="ok"))
    rows = read_rows(csv_path)
    assert [(r["seed"], r["status"], r["value"]) for r in rows] == [("0", "ok", "0.5"),
                                                                   ("1", "ok", "0.6")]
    assert pending(cs, csv_path, runs) == []


def test_a_failing_launch_is_a_row_with_its_reason(tmp_path):
    csv_path, runs = tmp_path / "t.csv", tmp_path / "runs"

    def launch(argv, log_path):
        log_path.write_text("fedavg on fmnist\npflt run: error: clients_per_round S=40 > "
                            "number of clients N=4\n")
        return 2

    new = run_cells(_cells((0,)), csv_path, runs, launch=launch, log=lambda s: None)
    assert [(r["status"], r["reason"]) for r in new] == [
        ("exit 2", "clients_per_round S=40 > number of clients N=4")]
    assert read_rows(csv_path)[0]["value"] == "nan"


def test_failure_reason_of_a_signal_and_of_an_empty_log(tmp_path):
    assert failure_reason(tmp_path / "none.log", -signal.SIGKILL) == \
        "killed by signal 9 (SIGKILL)"
    (tmp_path / "e.log").write_text("")
    assert failure_reason(tmp_path / "e.log", 1) == "no output"
    (tmp_path / "t.log").write_text("Traceback ...\nRuntimeError: boom\n")
    assert failure_reason(tmp_path / "t.log", 1) == "RuntimeError: boom"


def test_collect_records_k_hat_and_options(tmp_path):
    c = cells(REP, seeds=[0], rounds=2, columns=["fmnist_mlr"], methods=["CGPFL-Heur"],
              overrides={"clients": "4"})[0]
    (tmp_path / "summary.json").write_text(json.dumps(
        {"round": 2, "personalized_accuracy": 0.5, "k_hat": 3.0}))
    (tmp_path / "history.csv").write_text("round,personalized_accuracy\n0,0.1\n2,0.5\n")
    row = collect(c, tmp_path, "cmd")
    assert (row["k_hat"], row["options"], row["value"], row["best_round"]) == \
        ("3", "clients=4", "0.5", 2)
    (tmp_path / "summary.json").write_text(json.dumps({"round": 1}))
    row = collect(c, tmp_path, "cmd")
    assert row["status"] == "incomplete" and "lacks round 2" in row["reason"]


@pytest.mark.parametrize("content", [os.urandom(64) + b"\xff\xfe", b"a,b\n1,2\n"])
def test_not_a_reproduction_csv_is_one_line_naming_the_file(tmp_path, content):
    path = tmp_path / "x.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"x.csv: not a reproduction CSV"):
        read_rows(path)


def test_older_csvs_read_with_the_new_columns_empty(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("method,model,seed,metric,value,command\nA,mlr,0,m,0.5,c\n")
    (row,) = read_rows(path)
    assert set(row) == set(FIELDS) and row["k_hat"] == "" and row["value"] == "0.5"
