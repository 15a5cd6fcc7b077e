"""``pflt per-client``: every client's accuracy of a run, drawn, in a CSV and as quantiles
(issue 36: they were stored and no command showed them)."""

import csv
import os
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


def _edited_run(run_dir, tmp_path, edit):
    """A copy of the run whose last entry's personalized accuracies are ``edit(values)``."""
    import shutil

    copy = tmp_path / "edited"
    shutil.copytree(run_dir, copy)
    key = "personalized_client_accuracy"
    hist = json.loads((copy / "history.json").read_text())
    hist["entries"][-1][key] = edit(hist["entries"][-1][key])
    (copy / "history.json").write_text(json.dumps(hist))
    lines = [json.loads(line) for line in (copy / "history.jsonl").read_text().splitlines()]
    lines[-1][key] = edit(lines[-1][key])
    (copy / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return copy


@pytest.mark.parametrize("edit, message", [
    (lambda v: [1.7] + v[1:], "personalized_client_accuracy[0] = 1.7 is not an accuracy"),
    (lambda v: v[:2] + [-0.3] + v[3:], "[2] = -0.3 is not an accuracy"),
    (lambda v: [float("nan")] + v[1:], "[0] = nan is not an accuracy"),
    (lambda v: v[:1], "holds 1 accuracies for a run of 6 clients"),
    (lambda v: v + [0.5] * 4, "holds 10 accuracies for a run of 6 clients"),
    (lambda v: ["0.5"] + v[1:], "expected a list of numbers"),   # the history's own check
    (lambda v: {"a": 1}, "expected a list of numbers"),
])
def test_impossible_accuracies_are_one_line_naming_the_file(run_dir, tmp_path, capsys, edit,
                                                            message):
    # mutation caught: the values printed as quantiles unchecked (issue 43.5: 1.7, -0.3, NaN,
    # one value for ten clients were accepted)
    copy = _edited_run(run_dir, tmp_path, edit)
    out = tmp_path / "o"
    assert main(["per-client", str(copy), "--model", "personalized", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and f"{copy / 'history.json'}" in err and message in err
    assert "%" not in captured.out and not out.exists()


def test_out_is_a_folder_or_a_png_never_a_stem(run_dir, tmp_path, capsys, monkeypatch):
    # mutation caught: --out runs writing runs.png and runs.csv beside a folder named runs
    # ("wrote runs and runs.csv"); --out x.csv writing x.png
    monkeypatch.chdir(tmp_path)
    assert main(["per-client", str(run_dir), "--out", "runs"]) == 0
    assert "wrote runs/per_client.png and runs/per_client.csv" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["per_client.csv",
                                                                      "per_client.png"]
    assert not (tmp_path / "runs.png").exists() and not (tmp_path / "runs.csv").exists()
    assert main(["per-client", str(run_dir), "--out", "fig/a.png"]) == 0
    assert (tmp_path / "fig" / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig" / "a.csv").is_file()
    for bad, message in (("x.csv", "not a .csv file"), ("fig/a.csv", "neither a directory"),
                         ("/dev/null", "/dev is a system directory"),
                         ("/dev/pflt-test.png", "/dev is a system directory"),
                         ("/proc/x", "/proc is a system directory")):
        if bad == "fig/a.csv":
            pass          # exists (written above): a file that is not a .png
        assert main(["per-client", str(run_dir), "--out", bad]) == 2, bad
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (bad, err)
    assert not (tmp_path / "x.png").exists()
    assert not list(tmp_path.glob("x.*")) and not os.path.exists("/dev/pflt-test.png")
