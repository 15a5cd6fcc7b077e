"""``pflt per-client``: every client's accuracy of a run, drawn, in a CSV and as quantiles
(issue 36: they were stored and no command showed them)."""

import csv
import json

import numpy as np
import pytest

from pflt.cli import main
from pflt.commands.per_client import quantile


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "pfedme"
    assert main(["run", "--algorithm", "pfedme", "--clients", "6", "--clients-per-round", "3",
                 "--rounds", "2", "--local-rounds", "2", "--no-progress", "--out",
                 str(out)]) == 0
    return out


def test_the_csv_holds_the_stored_accuracies_of_the_last_round(run_dir, tmp_path, capsys):
    png = tmp_path / "pc" / "clients.png"
    assert main(["per-client", str(run_dir), "--model", "personalized", "--out", str(png)]) == 0
    stored = json.loads((run_dir / "history.json").read_text())["entries"][-1]
    rows = list(csv.DictReader(open(png.with_suffix(".csv"))))
    assert [float(r["accuracy"]) for r in rows] == stored["personalized_client_accuracy"]
    assert {r["round"] for r in rows} == {str(stored["round"])}
    assert png.stat().st_size > 0
    printed = capsys.readouterr().out
    median = float(np.median(stored["personalized_client_accuracy"]))
    assert f"50% {median:.4f}" in printed


def test_quantiles_are_numpys():
    values = sorted([0.1, 0.4, 0.35, 0.9, 0.2, 0.75, 0.6])
    for q in (0.0, 0.1, 0.5, 0.9, 1.0):
        assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)), abs=1e-15)


@pytest.mark.parametrize("extra, message", [
    (["--model", "nosuch"], "no model nosuch in round 2; evaluated: global, local, "
                            "personalized"),
    (["--round", "7"], "round 7 was not evaluated"),
])
def test_bad_choices_are_one_line_errors(run_dir, tmp_path, capsys, extra, message):
    assert main(["per-client", str(run_dir), *extra, "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_not_a_run_is_a_one_line_error(tmp_path, capsys):
    assert main(["per-client", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    assert "not a run directory" in capsys.readouterr().err
