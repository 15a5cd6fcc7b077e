"""``pflt verify`` keeps each finished check as it ends and a re-run resumes (issue 45 item
12): Ctrl-C in the middle keeps what finished (verification/core/progress.py), the same
command runs only the rest and writes the complete outputs, ``--fresh`` starts over, and
the cost estimate comes first (verification/core/check_costs.py)."""

from __future__ import annotations

import json

import pytest

from pflt.cli import main
from verification.core import check_costs
from verification.core.progress import LOG, PARTIAL
from verification.core.registry import Outcome, check


def register(calls: list[str], stop: dict):
    @check("fake.a_draws", paper="P", reference="Fig. 1", kind="identity")
    def a(ctx):
        calls.append("a")
        path = ctx.out_dir / "curve.csv"
        path.write_text("x,y\n1,2\n")
        return Outcome(measured=1.0, theoretical=1.0, holds=True, figures=(str(path),))

    @check("fake.b_stops", paper="P", reference="eq. (2)", kind="identity")
    def b(ctx):
        calls.append("b")
        if stop.pop("b", False):
            raise KeyboardInterrupt       # the user's Ctrl-C, inside the second check
        return Outcome(measured=2.0, theoretical=2.0, holds=True)

    @check("fake.c_fails", paper="P", reference="eq. (3)", kind="identity")
    def c(ctx):
        calls.append("c")
        return Outcome(measured=1.0, theoretical=3.0, holds=False)


def _verify(out, *extra):
    return main(["verify", "--quick", "--out", str(out), "--no-progress", *extra])


def test_ctrl_c_keeps_what_finished_and_the_same_command_resumes(fake_registry, tmp_path,
                                                                 capsys):
    calls: list[str] = []
    register(calls, {"b": True})
    out = tmp_path / "out"
    assert _verify(out) == 130
    err = capsys.readouterr().err
    assert calls == ["a", "b"]
    log = out / PARTIAL / LOG
    assert [json.loads(x)["entry"]["id"] for x in log.read_text().splitlines()] == \
        ["fake.a_draws"]
    assert (out / PARTIAL / "figures" / "fake.a_draws" / "seed0" / "curve.csv").is_file()
    assert not (out / "results.json").exists()          # the outputs are not half written
    assert f"1 finished check(s) kept in {log}" in err
    calls.clear()
    assert _verify(out) == 0
    err = capsys.readouterr().err
    assert calls == ["b", "c"]                           # a is not run again
    assert "resuming: 1 check(s)" in err and "1 already done" in err
    data = json.loads((out / "results.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in data["checks"]}
    assert verdicts == {"fake.a_draws": "HOLDS", "fake.b_stops": "HOLDS",
                        "fake.c_fails": "FAILS"}
    a = next(c for c in data["checks"] if c["id"] == "fake.a_draws")
    assert a["figures"] == ["figures/fake.a_draws/seed0/curve.csv"]
    assert (out / a["figures"][0]).read_text() == "x,y\n1,2\n"
    assert not (out / PARTIAL).exists()                  # complete: the record is gone
    calls.clear()
    assert _verify(out) == 0 and calls == ["a", "b", "c"]    # so the next run is fresh


def test_fresh_starts_over_and_other_seeds_do_not_resume(fake_registry, tmp_path, capsys):
    calls: list[str] = []
    stop = {"b": True}
    register(calls, stop)
    out = tmp_path / "out"
    assert _verify(out) == 130
    calls.clear()
    stop["b"] = True
    assert _verify(out, "--seeds", "2") == 130          # another size of run: not resumed
    assert calls == ["a", "a", "b"]
    calls.clear()
    assert _verify(out, "--fresh") == 0 and calls == ["a", "b", "c"]
    capsys.readouterr()


def test_a_line_cut_by_a_kill_is_skipped(fake_registry, tmp_path, capsys):
    calls: list[str] = []
    register(calls, {"b": True})
    out = tmp_path / "out"
    assert _verify(out) == 130
    with open(out / PARTIAL / LOG, "a") as fh:
        fh.write('{"size": "quick", "seeds": [0], "entry": {"id": "fake.b_st')
    calls.clear()
    assert _verify(out) == 0 and calls == ["b", "c"]
    capsys.readouterr()


def test_the_estimate_counts_measured_and_unmeasured_checks():
    table = {"conditions": "", "quick": {"x": 30.0, "y": 90.0}, "full": {}}
    line = check_costs.estimate(["x", "y", "z"], "quick", 2, done=4, table=table)
    assert line.startswith("pflt verify --quick: 3 check(s) to run × 2 seed(s) (4 already "
                           "done")
    assert "estimated 4 min 00 s of CPU time for the 2 measured, 1 never measured" in line
    assert "the longest: y 3 min 00 s, x 1 min 00 s" in line
    assert "never measured" not in check_costs.estimate(["x"], "quick", 1, table=table)
    assert "3 check(s)" in check_costs.estimate(["x", "y", "z"], "full", 1, table=table)


def test_merge_takes_the_cpu_seconds_per_seed_of_a_results_file():
    table = {"conditions": "", "quick": {}, "full": {"old": 1.0}}
    results = {"size": "full", "checks": [
        {"id": "a", "verdict": "HOLDS", "cpu_seconds": 10.0, "n_seeds": 2},
        {"id": "b", "verdict": "ERROR", "cpu_seconds": 1.0, "n_seeds": 1},
        {"id": "c", "verdict": "HOLDS", "cpu_seconds": None, "n_seeds": 1}]}
    table, n = check_costs.merge(results, table)
    assert n == 1 and table["full"] == {"old": 1.0, "a": 5.0}
    with pytest.raises(ValueError, match="size"):
        check_costs.merge({"size": "huge", "checks": []}, table)


def test_the_shipped_table_names_registered_checks_only():
    from verification.core.registry import load_all

    ids = set(load_all())
    table = check_costs.load()
    assert table["quick"], "no measured quick costs shipped"
    for size in ("quick", "full"):
        assert set(table[size]) <= ids, set(table[size]) - ids
        assert all(v >= 0 for v in table[size].values())


def test_estimate_prints_the_cost_and_runs_nothing(fake_registry, tmp_path, capsys,
                                                   monkeypatch):
    calls: list[str] = []
    register(calls, {})
    table = {"conditions": "planted", "quick": {"fake.a_draws": 90.0}, "full": {}}
    monkeypatch.setattr(check_costs, "load", lambda: table)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--quick", "--estimate", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert calls == [] and not (tmp_path / "verify_out").exists()
    assert "3 check(s) to run × 2 seed(s); estimated 3 min 00 s of CPU time for the 1 " \
           "measured, 2 never measured" in out
    assert "measured: planted" in out
