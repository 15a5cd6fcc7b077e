"""verification/experiments/transfer_metrics.py: companion CSVs read the runs' lowest / top
5 % and never invent a number."""

from __future__ import annotations

import csv
import json

import pytest

from verification.experiments.reproduction_run import put_row as append_row, read_rows
from verification.experiments.transfer_metrics import (companion_metric, derive, main,
                                                       write_companions)


def fake_run(path, low5: float, best_low5: float, rounds: int = 10):
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps(
        {"round": rounds, "global_accuracy_mean": 0.8, "global_accuracy_low5": low5,
         "global_accuracy_top5": 0.97}))
    with (path / "history.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["round", "global_accuracy_low5", "global_accuracy_top5"])
        w.writerow([5, best_low5, 0.9])
        w.writerow([rounds, low5, 0.97])


def row(tmp_path, name, seed=0, status="ok"):
    return dict(method="PLGU-LF", model="cnn", seed=seed, metric="global_accuracy_mean",
                value=0.8, command=f"pflt run --seed {seed} --out {tmp_path / name}",
                column="fmnist_C10", best_value=0.8, best_round=10, rounds=10, status=status)


def test_companion_rows_hold_the_runs_low5_and_best(tmp_path):
    fake_run(tmp_path / "a", low5=0.61, best_low5=0.7)
    src, out = tmp_path / "t.csv", tmp_path / "t_low5.csv"
    append_row(src, row(tmp_path, "a"))
    assert derive(src, "low5", out) == (1, 0)
    (r,) = read_rows(out)
    assert r["metric"] == "global_accuracy_low5" and float(r["value"]) == 0.61
    assert float(r["best_value"]) == 0.7 and r["best_round"] == "5"
    assert r["command"] == row(tmp_path, "a")["command"]     # the same command re-runs it


def test_absent_run_keeps_the_earlier_row_and_failed_runs_have_none(tmp_path):
    fake_run(tmp_path / "a", low5=0.61, best_low5=0.7)
    src, out = tmp_path / "t.csv", tmp_path / "t_low5.csv"
    append_row(src, row(tmp_path, "a"))
    append_row(src, row(tmp_path, "gone", seed=1))
    append_row(src, row(tmp_path, "bad", seed=2, status="exit 1"))
    assert derive(src, "low5", out) == (1, 0)       # "gone" has no run, "bad" failed
    assert [r["seed"] for r in read_rows(out)] == ["0"]
    (tmp_path / "a" / "summary.json").unlink()      # the run directory is gone now
    assert derive(src, "low5", out) == (0, 1)
    assert float(read_rows(out)[0]["value"]) == 0.61


def test_a_directory_holding_another_run_gives_no_number(tmp_path):
    # the cell's directory was reused by a run at another T: its summary is not this row's
    fake_run(tmp_path / "a", low5=0.61, best_low5=0.7, rounds=5)
    src, out = tmp_path / "t.csv", tmp_path / "t_top5.csv"
    append_row(src, row(tmp_path, "a"))
    assert derive(src, "top5", out) == (0, 0) and read_rows(out) == []


def test_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match="suffix must be one of"):
        derive(tmp_path / "x.csv", "median", tmp_path / "y.csv")
    with pytest.raises(ValueError, match="not an accuracy key"):
        companion_metric("global_loss", "low5")
    assert main(["plgu_table1_transfer_fmnist", "--results", str(tmp_path)]) == 2
    assert "absent: run pflt reproduce" in capsys.readouterr().err


def test_write_companions_writes_csv_and_markdown(tmp_path):
    fake_run(tmp_path / "runs" / "a", low5=0.61, best_low5=0.7)
    append_row(tmp_path / "plgu_table1_transfer_fmnist.csv", row(tmp_path / "runs", "a"))
    paths = write_companions("plgu_table1_transfer_fmnist", tmp_path, log=lambda s: None)
    assert [p.name for p in paths] == ["plgu_table1_transfer_fmnist_low5.csv",
                                       "plgu_table1_transfer_fmnist_low5.md",
                                       "plgu_table1_transfer_fmnist_top5.csv",
                                       "plgu_table1_transfer_fmnist_top5.md"]
    md = (tmp_path / "plgu_table1_transfer_fmnist_low5.md").read_text()
    assert "lowest 5 % of clients" in md and "transfer (Fashion-MNIST in place of CIFAR-10)" in md
    assert "61.00" in md
