"""benchmarks/leaderboard.py: the sweep files it writes, the "better than Local" rule, and a
tiny end-to-end run whose table reads the runs' own histories (last and best rounds)."""

import csv
import json
import math

import pytest


def test_sweep_file_runs_every_algorithm_at_its_defaults(load_script):
    lb = load_script("leaderboard")
    text = lb.sweep_file("mnist5k-dirichlet", ["local", "fedbn"], 3, 20, 50)
    assert 'algorithm = ["local", "fedbn"]' in text and "seed = [0, 1, 2]" in text
    assert 'data = "mnist5k"' in text and "dirichlet_alpha = 0.5" in text
    assert '[algorithms.fedbn]\nmodel = "mlp-bn"' in text
    assert "lr" not in text            # no hyper-parameter is tuned: paper defaults


def test_better_than_local_needs_two_standard_errors(load_script):
    lb = load_script("leaderboard")
    local = {"last_mean": 0.80, "last_sd": 0.02, "n": 3}
    se = math.sqrt(2 * 0.02 ** 2 / 3)
    assert lb._beats({"last_mean": 0.80 + 2.1 * se, "last_sd": 0.02, "n": 3}, local) is True
    assert lb._beats({"last_mean": 0.80 + 1.9 * se, "last_sd": 0.02, "n": 3}, local) is False
    assert lb._beats({"last_mean": 0.79, "last_sd": 0.0, "n": 0}, local) is None


def test_tiny_leaderboard_reads_last_and_best_from_the_runs(load_script, tmp_path, capsys):
    lb = load_script("leaderboard")
    out = tmp_path / "lb"
    assert lb.main(["--out", str(out), "--settings", "synthetic", "--algorithms", "fedavg",
                    "--clients", "10", "--rounds", "2", "--seeds", "2"]) == 0
    rows = list(csv.DictReader(open(out / "leaderboard.csv")))
    assert {r["algorithm"] for r in rows} == {"local", "fedavg"}   # Local added as reference
    fedavg = next(r for r in rows if r["algorithm"] == "fedavg")
    assert fedavg["model"] == "global" and fedavg["headline"] == "True" and fedavg["n"] == "2"
    # independently from the histories: last and best of global_accuracy, mean over seeds
    lasts, bests = [], []
    for point in sorted((out / "synthetic").glob("*/point-*")):
        entries = [json.loads(l) for l in open(point / "history.jsonl")]
        if entries[0].get("global_accuracy") is None:
            continue
        acc = [e["global_accuracy"] for e in entries]
        lasts.append(acc[-1]), bests.append(max(acc))
    assert float(fedavg["last_mean"]) == pytest.approx(sum(lasts) / 2, abs=1e-12)
    assert float(fedavg["best_mean"]) == pytest.approx(sum(bests) / 2, abs=1e-12)
    assert float(fedavg["best_mean"]) >= float(fedavg["last_mean"])
    md = (out / "leaderboard.md").read_text()
    assert "### synthetic" in md and "| last round | best round | s/round |" in md
    assert (out / "leaderboard.png").stat().st_size > 0


def test_a_refused_algorithm_is_reported_and_the_others_still_run(load_script, tmp_path,
                                                                    monkeypatch):
    lb = load_script("leaderboard")
    import pflt.cli

    real = pflt.cli.main

    def refusing(argv):                   # fedavg's sweep stops with a one-line error
        if any(str(a).endswith("fedavg.toml") for a in argv):
            import sys
            print("pflt sweep: error: planted refusal", file=sys.stderr)
            return 2
        return real(argv)
    monkeypatch.setattr(pflt.cli, "main", refusing)
    out = tmp_path / "lb"
    assert lb.main(["--out", str(out), "--settings", "synthetic", "--algorithms", "fedavg",
                    "--clients", "10", "--rounds", "1", "--seeds", "1"]) == 0
    md = (out / "leaderboard.md").read_text()
    assert "synthetic, fedavg: planted refusal" in md
    assert "| local | local (headline) |" in md


def test_device_reaches_every_sweep(load_script, tmp_path, monkeypatch):
    lb = load_script("leaderboard")
    import pflt.cli

    seen, real = [], pflt.cli.main

    def recording(argv):
        seen.append(list(argv))
        return real(argv)
    monkeypatch.setattr(pflt.cli, "main", recording)
    assert lb.main(["--out", str(tmp_path / "lb"), "--settings", "synthetic", "--algorithms",
             "fedavg", "--clients", "10", "--rounds", "1", "--seeds", "1", "--device", "cpu"]) == 0
    assert "--device cpu" in (tmp_path / "lb" / "leaderboard.md").read_text()
    assert len(seen) == 2 and all(a[0] == "sweep" and a[-2:] == ["--device", "cpu"]
                                  for a in seen)
