"""paper_figures/cgpfl_fig2_fmnist.py on small Fashion-MNIST-format files: the reproduction's
runs, then the curves (mean over seeds of each run's history) and the figure."""

from __future__ import annotations

import csv

import pytest

from paper_figures import cgpfl_fig2_fmnist as fig2
from pflt.cli import main
from synthetic.real_data import registry


def test_fig2_curves_are_the_seed_means_of_the_runs(tmp_path, capsys, real_format_data):
    # mutations caught: one seed's history instead of the mean, loss of another model,
    # a method's runs mixed into another's curve
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    out, runs = tmp_path / "out", tmp_path / "runs"
    with registry.override({"fmnist": entry}):
        assert main(["reproduce", fig2.NAME, "--data-dir", str(d), "--seeds", "0", "1",
                     "--rounds", "4", "--columns", "fmnist_mlr", "--methods", "CGPFL (K=1)",
                     "CGPFL (K=2)", "pFedMe (PM)", "--out", str(out), "--runs-dir", str(runs),
                     "--option", "clients=4", "--option", "clients_per_round=4",
                     # CGPFL's partition draws no image twice in a client: the small files
                     # hold 40 per class, so a label-skew partition of 20-30 images instead
                     "--option", "partition=label-skew", "--option", "size_range=20 30"]) == 0
    data = fig2.curves(out / f"{fig2.NAME}.csv")
    assert set(data) == {("fmnist_mlr", m) for m in ("CGPFL (K=1)", "CGPFL (K=2)", "pFedMe (PM)")}
    hist = []
    for s in (0, 1):
        with (runs / fig2.NAME / f"cgpfl-k-2.fmnist_mlr.s{s}" / "history.csv").open() as fh:
            hist.append(list(csv.DictReader(fh)))
    cur = data[("fmnist_mlr", "CGPFL (K=2)")]
    assert cur["round"] == [int(h["round"]) for h in hist[0]] and cur["seeds"] == 2
    for i in range(len(cur["round"])):
        acc = [float(h[i]["personalized_accuracy"]) for h in hist]
        loss = [float(h[i]["personalized_loss"]) for h in hist]
        assert cur["accuracy"][i] == pytest.approx(sum(acc) / 2)
        assert cur["loss"][i] == pytest.approx(sum(loss) / 2)
    assert fig2.main(["--csv", str(out / f"{fig2.NAME}.csv"), "--out", str(tmp_path / "fig")]) == 0
    png, points = tmp_path / "fig" / f"{fig2.NAME}.png", tmp_path / "fig" / f"{fig2.NAME}.csv"
    assert png.stat().st_size > 10_000
    assert len(list(csv.DictReader(points.open()))) == 3 * len(cur["round"])


def test_fig2_without_results_says_which_command(tmp_path, capsys):
    assert fig2.main(["--csv", str(tmp_path / "none.csv"), "--out", str(tmp_path)]) == 2
    assert "pflt reproduce cgpfl_fig2_fmnist" in capsys.readouterr().err
