"""``pflt compare`` and the mean ± sd / per-algorithm tables of ``pflt sweep`` (in-process)."""

import csv
import json
import math
import statistics

import pytest

from pflt.aggregate import format_mean_sd, mean_sd
from pflt.cli import main

TINY = ["--clients", "6", "--rounds", "2", "--local-rounds", "1", "--clients-per-round", "3",
        "--no-progress"]


def _run(tmp_path, name, algorithm, seed, *extra):
    out = tmp_path / name
    assert main(["run", "--algorithm", algorithm, "--seed", str(seed), "--out", str(out),
                 *TINY, *extra]) == 0
    return out


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return [_run(tmp, "fa0", "fedavg", 0), _run(tmp, "fa1", "fedavg", 1),
            _run(tmp, "pm0", "pfedme", 0, "--inner-steps", "1"),
            _run(tmp, "pm1", "pfedme", 1, "--inner-steps", "1")]


def test_mean_sd_is_the_sample_statistics():
    vals = [0.5, 0.7, 0.9]
    mean, sd, n = mean_sd(vals)
    assert (mean, n) == (pytest.approx(statistics.mean(vals)), 3)
    assert sd == pytest.approx(statistics.stdev(vals))  # ddof = 1
    assert math.isnan(mean_sd([0.3])[1]) and mean_sd([])[2] == 0
    assert mean_sd([1.0, float("nan")])[2] == 1  # a diverged seed is dropped
    assert format_mean_sd(0.5, 0.1, 2) == "0.5000 ± 0.1000"
    assert format_mean_sd(0.5, float("nan"), 1) == "0.5000 ± –"


def _csv(out):
    return list(csv.DictReader(open(out / "compare.csv")))


def test_compare_groups_seeds_and_reports_mean_sd(four_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, four_runs), "--metric", "*_accuracy",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 configuration(s)" in printed
    rows = _csv(out)
    assert {r["configuration"] for r in rows} == {"fedavg", "pfedme"}  # only the algorithm differs
    last = {(r["configuration"], r["metric"]): r for r in rows if r["at"] == "last"}
    fed = last[("fedavg", "global_accuracy")]
    finals = [json.loads((d / "summary.json").read_text())["global_accuracy"]
              for d in four_runs[:2]]
    mean, sd, n = mean_sd(finals)
    # numeric columns, not "0.7267 ± 0.0045" strings
    assert (float(fed["mean"]), float(fed["sd"]), int(fed["n"])) == (
        pytest.approx(mean), pytest.approx(sd), 2)
    assert fed["finished"] == "2" and fed["unfinished"] == "0"
    assert "global_accuracy (last)" in printed and format_mean_sd(mean, sd, n) in printed
    assert (out / "compare.png").stat().st_size > 0 and (out / "compare.md").exists()


def test_compare_headline_names_each_papers_model_at_last_and_best(four_runs, tmp_path,
                                                                   capsys):
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, four_runs), "--metric", "*_accuracy",
                 "--out", str(out)]) == 0
    head = {(r["configuration"], r["at"]): r for r in _csv(out)
            if r["metric"] == "headline_accuracy"}
    assert head[("fedavg", "last")]["model"] == "global"
    assert head[("pfedme", "last")]["model"] == "personalized"
    # best = each run's best evaluated round (max over its history), then mean over seeds
    best = [max(e["personalized_accuracy"] for e in json.loads(
        (d / "history.json").read_text())["entries"]) for d in four_runs[2:]]
    assert float(head[("pfedme", "best")]["mean"]) == pytest.approx(statistics.mean(best))
    last = [json.loads((d / "summary.json").read_text())["personalized_accuracy"]
            for d in four_runs[2:]]
    assert float(head[("pfedme", "last")]["mean"]) == pytest.approx(statistics.mean(last))
    printed = capsys.readouterr().out
    assert "| headline |" in printed and "best headline accuracy (best round)" in printed
    assert main(["compare", *map(str, four_runs), "--at", "best", "--out", str(out)]) == 0
    assert {r["at"] for r in _csv(out)} == {"best"}


def test_compare_metric_that_does_not_exist_is_a_user_error(four_runs, tmp_path, capsys):
    assert main(["compare", str(four_runs[0]), "--metric", "nope",
                 "--out", str(tmp_path / "c")]) == 2
    assert "matches no metric" in capsys.readouterr().err


def test_compare_a_directory_that_is_not_a_run_is_a_user_error(tmp_path, capsys):
    assert main(["compare", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert "no history.json" in capsys.readouterr().err


SWEEP = """
clients = 6
rounds = 2
local_rounds = 1
clients_per_round = 3
[sweep]
algorithm = ["fedavg", "pfedme"]
seed = [0, 1]
[algorithms.fedavg]
lr = 0.05
[algorithms.pfedme]
inner_steps = 1
lam = [10.0, 20.0]
"""


def test_sweep_over_algorithms_with_per_algorithm_tables_and_mean_sd(tmp_path, capsys):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    out = tmp_path / "sw"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    records = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    # fedavg: 2 seeds; pfedme: 2 λ × 2 seeds
    assert len(records) == 6
    for r in records:
        assert r["out"] == f"point-{r['index']:03d}"  # relative to the sweep directory
        hp = json.loads((out / r["out"] / "history.json").read_text()
                        )["config"]["hyperparameters"]
        if r["point"]["algorithm"] == "fedavg":
            assert hp["lr"] == 0.05 and "lam" not in hp
        else:
            assert hp["inner_steps"] == 1 and hp["lam"] == r["point"]["lam"]
    rows = list(csv.DictReader(open(out / "summary_by_config.csv")))
    assert len(rows) == 3 and all(r["seeds"] == "2" for r in rows)
    pm10 = next(r for r in rows if r["algorithm"] == "pfedme" and float(r["lam"]) == 10.0)
    finals = [r["final"]["personalized_accuracy"] for r in records
              if r["point"].get("lam") == 10.0]
    assert float(pm10["personalized_accuracy_mean"]) == pytest.approx(statistics.mean(finals))
    assert float(pm10["personalized_accuracy_sd"]) == pytest.approx(statistics.stdev(finals))
    printed = capsys.readouterr().out
    assert "±" in printed
    # compare reads a sweep directory as all of its points
    assert main(["compare", str(out), "--metric", "global_accuracy",
                 "--out", str(tmp_path / "c")]) == 0
    assert "3 configuration(s)" in capsys.readouterr().out


def test_sweep_clash_between_sweep_and_algorithm_table_is_an_error(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[sweep]\nalgorithm = ['pfedme']\nlam = [1.0]\n[algorithms.pfedme]\n"
                   "lam = [2.0]\n")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert "both in [sweep]" in capsys.readouterr().err
