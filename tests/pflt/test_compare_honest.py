"""Issue 23, deliverable 4: ``pflt compare`` cannot double count — the same run given twice
is counted once, a run that is not finished is named and never averaged, a sweep's points
are read from the sweep directory itself (copied, moved, or compared from anywhere)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pflt.aggregate import load_run
from pflt.cli import main

TINY = ["--algorithm", "fedavg", "--clients", "4", "--clients-per-round", "2",
        "--local-rounds", "1", "--max-client-size", "20", "--no-progress"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("honest")
    for seed in (0, 1, 2):
        assert main(["run", *TINY, "--rounds", "2", "--seed", str(seed),
                     "--out", str(tmp / f"s{seed}")]) == 0
    return tmp


def _global_last(out):
    rows = list(csv.DictReader(open(out / "compare.csv")))
    return next(r for r in rows if r["metric"] == "global_accuracy" and r["at"] == "last")


def _copy(runs, tmp_path, names=("s0", "s1", "s2")):
    for n in names:
        shutil.copytree(runs / n, tmp_path / n)
    return [tmp_path / n for n in names]


def test_the_same_run_given_twice_is_counted_once(runs, tmp_path, capsys):
    s0 = runs / "s0"
    link = tmp_path / "link"
    link.symlink_to(s0, target_is_directory=True)
    args = [str(s0), str(s0), f"{runs}/./s0", str(link), str(runs / "s1")]
    assert main(["compare", *args, "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert err.count("same run as") == 3
    row = _global_last(tmp_path / "c")
    assert row["n"] == "2" and row["finished"] == "2"


def test_a_run_without_summary_is_unfinished_and_not_averaged(runs, tmp_path, capsys):
    s0, s1, s2 = _copy(runs, tmp_path)
    (s2 / "summary.json").unlink()                    # killed before its end
    assert main(["compare", str(s0), str(s1), str(s2), "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"{s2} is unfinished" in err
    row = _global_last(tmp_path / "c")
    assert (row["n"], row["finished"], row["unfinished"]) == ("2", "2", "1")
    expected = [json.loads((d / "summary.json").read_text())["global_accuracy"]
                for d in (s0, s1)]
    assert float(row["mean"]) == pytest.approx(sum(expected) / 2)


def test_a_run_still_being_written_is_reported_running(runs, tmp_path, capsys):
    s0, s1, _ = _copy(runs, tmp_path, ("s0", "s1", "s2"))
    (s1 / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getppid()}))
    assert main(["compare", str(s0), str(s1), "--out", str(tmp_path / "c")]) == 0
    assert "is running" in capsys.readouterr().err
    assert _global_last(tmp_path / "c")["n"] == "1"


def test_a_history_shorter_than_its_rounds_is_unfinished(runs, tmp_path):
    (s0,) = _copy(runs, tmp_path, ("s0",))
    hist = json.loads((s0 / "history.json").read_text())
    hist["config"]["rounds"] = 50          # e.g. a resumed run killed on its way to 50
    (s0 / "history.json").write_text(json.dumps(hist))
    run = load_run(s0)
    assert run.status == "unfinished" and "of 50" in run.why and run.final == {}


def test_a_diverged_run_is_named_and_not_averaged(tmp_path, capsys):
    out = tmp_path / "d"
    code = main(["run", *TINY, "--rounds", "3", "--lr", "1e6", "--out", str(out)])
    assert code == 1 and (out / "diverged.json").is_file()
    assert load_run(out).status == "diverged"
    capsys.readouterr()
    assert main(["compare", str(out), "--out", str(tmp_path / "c")]) == 0
    assert "is diverged" in capsys.readouterr().err
    assert _global_last(tmp_path / "c")["diverged"] == "1"
    assert _global_last(tmp_path / "c")["n"] == "0"


SWEEP = ("algorithm = 'fedavg'\nclients = 4\nclients_per_round = 2\nrounds = 1\n"
         "local_rounds = 1\nmax_client_size = 20\n[sweep]\nseed = [0, 1]\n")


def test_a_copied_sweep_reads_its_own_points_from_any_directory(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text(SWEEP)
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "s.toml", "--out", "sw", "--no-progress"]) == 0
    shutil.copytree(tmp_path / "sw", tmp_path / "copy")
    shutil.rmtree(tmp_path / "sw")        # the original is gone: the copy must not need it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["compare", str(tmp_path / "copy"), "--out", "c"]) == 0
    assert _global_last(elsewhere / "c")["n"] == "2"


def test_old_sweep_records_with_absolute_or_start_relative_paths_resolve_inside(tmp_path,
                                                                                monkeypatch):
    cfg = tmp_path / "s.toml"
    cfg.write_text(SWEEP)
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "sw"), "--no-progress"]) == 0
    log = tmp_path / "sw" / "sweep.jsonl"
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    recs[0]["out"] = "/somewhere/else/sw/point-000"       # the old absolute form
    recs[1]["out"] = "runs/sw/point-001"                    # the old cwd-relative form
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    from pflt.aggregate import sweep_points
    assert sweep_points(tmp_path / "sw") == [tmp_path / "sw" / "point-000",
                                             tmp_path / "sw" / "point-001"]
    recs[1]["out"] = "../../etc"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ValueError, match="line 2: key 'out'"):
        sweep_points(tmp_path / "sw")


def test_a_best_inside_the_seed_noise_says_so():
    """Issue 36: 0.8092 ± 0.0049 over 0.8083 ± 0.0051 (3 seeds) is no single best."""
    from pflt.aggregate import Group
    from pflt.commands.compare import noise_note

    other = Group("k", {}, label="algorithm=fedavg")
    note = noise_note((0.8092, 0.0049, 3), [((0.8083, 0.0051, 3), other)])
    assert "within noise" in note and "algorithm=fedavg 0.8083 ± 0.0051" in note
    far = noise_note((0.8092, 0.0049, 3), [((0.70, 0.0051, 3), other)])
    assert "ahead of every other configuration" in far and "within noise" not in far
    one_seed = noise_note((0.8092, float("nan"), 1), [((0.70, float("nan"), 1), other)])
    assert "seed noise is unknown" in one_seed


def test_a_copy_of_a_run_is_not_a_second_seed(runs, tmp_path, capsys):
    """A copied run directory (same configuration and seed) was averaged as a second seed
    (sd 0); it is one run, with a note, whatever its path — a copy, a copy of a link."""
    s0, s1 = _copy(runs, tmp_path, ("s0", "s1"))
    shutil.copytree(s0, tmp_path / "copy-of-s0")
    (tmp_path / "elsewhere").mkdir()
    shutil.copytree(s0, tmp_path / "elsewhere" / "s0", symlinks=False)
    args = [str(s0), str(tmp_path / "copy-of-s0"), str(tmp_path / "elsewhere" / "s0"), str(s1)]
    assert main(["compare", *args, "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert err.count("same configuration and seed (0)") == 2    # mutation: no dedupe -> 0
    row = _global_last(tmp_path / "c")
    assert row["n"] == "2" and row["finished"] == "2"         # seeds 0 and 1, not 0, 0, 0, 1


def test_an_unfinished_copy_does_not_replace_the_finished_run(runs, tmp_path, capsys):
    s0, = _copy(runs, tmp_path, ("s0",))
    shutil.copytree(s0, tmp_path / "partial")
    (tmp_path / "partial" / "summary.json").unlink()
    assert main(["compare", str(tmp_path / "partial"), str(s0),
                 "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'partial'} has the same configuration and seed (0) as {s0}" in err
    row = _global_last(tmp_path / "c")
    assert row["n"] == "1" and row["finished"] == "1"

#: how a run is handed to compare: itself, another spelling, a link, a copy, a link to a copy
FORMS = ("path", "dot", "link", "copy", "link-to-copy")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(given_runs=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.sampled_from(FORMS)),
                           min_size=1, max_size=6))
def test_compare_counts_each_seed_once_however_its_runs_are_given(runs, tmp_path_factory,
                                                                  capsys, given_runs):
    """Property over compare's inputs (copies, links, mixed seeds): the table's n is the
    number of distinct seeds given, and every other directory is named in a note."""
    import itertools

    tmp = tmp_path_factory.mktemp("forms")
    counter = itertools.count()
    args = []
    for seed, form in given_runs:
        src = runs / f"s{seed}"
        k = next(counter)
        if form == "dot":
            args.append(f"{runs}/./s{seed}")
            continue
        if form in ("copy", "link-to-copy"):
            src = shutil.copytree(src, tmp / f"copy{k}")
        if form in ("link", "link-to-copy"):
            (tmp / f"link{k}").symlink_to(src, target_is_directory=True)
            src = tmp / f"link{k}"
        args.append(str(src))
    capsys.readouterr()
    assert main(["compare", *args, "--out", str(tmp / "c")]) == 0
    err = capsys.readouterr().err
    seeds = {s for s, _ in given_runs}
    row = _global_last(tmp / "c")
    assert row["n"] == str(len(seeds)) and row["finished"] == str(len(seeds))
    assert err.count("note:") == len(given_runs) - len(seeds)
