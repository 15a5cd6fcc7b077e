"""pflt.commands._sweep_input and the sweep's readers (issue 23): malformed or extreme
sweep files end in one line naming the file and the key, before anything runs."""

from __future__ import annotations

import time

import pytest

from pflt.cli import main
from pflt.commands._sweep_input import MAX_POINTS, grid_size
from pflt.commands.sweep import grid

BASE = ("algorithm = 'fedavg'\nclients = 4\nclients_per_round = 2\nrounds = 1\n"
        "local_rounds = 1\nmax_client_size = 20\n")


def _sweep(tmp_path, capsys, text):
    cfg = tmp_path / "user.toml"
    cfg.write_text(text)
    out = tmp_path / "o"
    try:
        code = main(["sweep", str(cfg), "--out", str(out), "--no-progress"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    return code, err, out


CASES = [
    (BASE + "when = 1979-05-27T07:32:00Z\n[sweep]\nseed = [0]\n", "when", "date/time"),
    (BASE + "[sweep]\nseed = [1979-05-27]\n", "sweep.seed", "date/time"),
    (BASE + "[sweep]\nseed = [07:32:00]\n", "sweep.seed", "date/time"),
    (BASE + "[sweep]\nseed = [0]\n[a.b.c.d]\nx = 1\n", "a is a table", "table"),
    (BASE + "[sweep]\nseed = [[0]]\n", "sweep.seed", "nested list"),
    (BASE + "[sweep]\nseed = [0]\nx = " + "[" * 3000 + "]" * 3000 + "\n", "user.toml",
     "nested too deeply"),
    (BASE + "[sweep]\nseed = [0]\n[algorithms.zzz]\nlr = 1\n", "[algorithms.zzz]",
     "not a registered algorithm"),
    (BASE + "[sweep]\nseed = [0]\n[algorithms.pfedme]\nlam = 1\n", "[algorithms.pfedme]",
     "never used"),
    (BASE + "[sweep]\nlr = [-1e-5]\n", "lr", "> 0"),
    (BASE.replace("algorithm = 'fedavg'\n", "algorithm = 'fedavg'\nlr = nan\n")
     + "[sweep]\nseed = [0]\n", "lr", "finite"),
    (BASE.replace("algorithm = 'fedavg'\n", "algorithm = 'fedavg'\nlr = -inf\n")
     + "[sweep]\nseed = [0]\n", "lr", "finite"),
    (BASE + "bogus = 1\n[sweep]\nseed = [0]\n", "bogus", "unknown"),
]


@pytest.mark.parametrize("text,key,what", CASES, ids=[c[1] + ":" + c[2] for c in CASES])
def test_bad_sweep_files_are_one_line_naming_the_users_file_and_key(text, key, what,
                                                                     tmp_path, capsys):
    code, err, out = _sweep(tmp_path, capsys, text)
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "user.toml" in lines[0] and key in lines[0] and what in lines[0], lines[0]
    assert "base.toml" not in lines[0] and "argument --" not in lines[0]
    assert not (out / "point-000").exists()        # refused before anything ran


def test_a_negative_exponent_value_is_a_value_not_an_option(tmp_path, capsys):
    # "-1e-5" on a command line looks like an option to argparse; the cells pass
    # --l2=-1e-05, so the value reaches the l2 check (and 1e-5 runs)
    code, err, _ = _sweep(tmp_path, capsys, BASE + "[sweep]\nl2 = [-1e-5]\n")
    assert code == 2 and "expected one argument" not in err and "--l2" in err, err
    code, err, _ = _sweep(tmp_path, capsys, BASE + "[sweep]\nl2 = [1e-5]\n")
    assert code == 0, err


def test_a_huge_grid_is_refused_up_front_from_the_list_lengths(tmp_path, capsys):
    seeds = list(range(200))
    lrs = [0.001 * (i + 1) for i in range(200)]
    start = time.perf_counter()
    code, err, out = _sweep(tmp_path, capsys, BASE + f"[sweep]\nseed = {seeds}\nlr = {lrs}\n")
    took = time.perf_counter() - start
    assert code == 2 and "40000 points" in err and "200 seed × 200 lr" in err, err
    assert took < 10, took          # was > 90 s of silent validation
    assert not out.exists()


def test_grid_size_counts_exactly_what_grid_builds():
    sweep = {"algorithm": ["fedavg", "pfedme"], "seed": [0, 1, 2]}
    per = {"pfedme": {"lam": [1, 2], "inner_steps": 3, "lr": [0.1, 0.2, 0.3]}}
    assert grid_size(sweep, per, "pfedme") == len(grid(sweep, per)) == 3 + 3 * 6
    assert MAX_POINTS >= 1000
