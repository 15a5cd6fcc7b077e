"""``pflt reproduce``: every registered table runs end to end on small files in the real
formats (gzipped IDX, CIFAR pickles; tests/verification/experiments/conftest.py writes them),
resumes, and each CSV row's command re-runs to its value."""

from __future__ import annotations

import csv
import json
import math
import shlex
from pathlib import Path

import pytest

from pflt.cli import main
from synthetic.real_data import registry
from verification.experiments.reproductions import REPRODUCTIONS


#: the CGPFL tables on the small files: 4 clients of 20-30 images (the CGPFL partition's
#: [400, 5000] images per client, drawn without replacement, do not fit 40 per class)
SMALL_FMNIST = ["--option", "clients=4", "--option", "clients_per_round=4", "--option",
                "partition=label-skew", "--option", "size_range=20 30"]
_CG = {"clients": "4", "clients_per_round": "4", "partition": "label-skew", "size_range": "20 30"}
SMALL_CNN = {"clients": "4", "clients_per_round": "2", "local_rounds": "2",
             "partition": "label-skew", "size_range": "20 20", "class_assignment": "random"}
_PLGU_SMALL = {"clients": "4", "clients_per_round": "2", "local_rounds": "2", "head_steps": "2"}
#: per reproduction: (--option overrides that make it small, the columns the test runs)
SMALL = {
    "cgpfl_table1_fmnist": (_CG, None),
    "cgpfl_table1_fmnist_lr_grid": (_CG, ["fmnist_mlr"]),
    "cgpfl_table1_fmnist_tune": (_CG, ["fmnist_mlr"]),
    "cgpfl_table1_mnist": (_CG, None),
    "cgpfl_table1_cifar10": ({**SMALL_CNN, "clients_per_round": "4", "classes_per_client": "3"}, None),
    "cgpfl_table2_lambda": (_CG, ["mnist_mlr", "fmnist_dnn"]),
    "cgpfl_fig2_fmnist": ({**_CG, "clients": "8", "clients_per_round": "8"}, ["fmnist_dnn"]),
    "pfedme_table1_mnist": ({"clients": "3", "size_range": "20 40", "clients_per_round": "3"}, None),
    "pfedme_figs_mnist": ({"clients": "3", "size_range": "20 40", "clients_per_round": "3"},
                          ["mnist_mlr"]),
    "ppfe_table1": (SMALL_CNN, None),
    "ppfe_table2_dirichlet": ({k: v for k, v in SMALL_CNN.items() if k not in
                               ("partition", "size_range", "class_assignment")},
                              ["cifar10_dir1.0"]),
    "plgu_table1_global": ({k: v for k, v in _PLGU_SMALL.items() if k != "head_steps"}, None),
    "plgu_table2_personalized": (_PLGU_SMALL, None),
    **{f"pfedme_{t}_transfer_fmnist": ({"clients": "3", "size_range": "20 40",
                                        "clients_per_round": "3"}, ["fmnist_mlr"])
       for t in ("table1", "figs")},
    "ppfe_table1_transfer_fmnist": (SMALL_CNN, None),
    "ppfe_ablations_transfer_fmnist": (SMALL_CNN, ["fmnist_(100,2)"]),
    **{f"plgu_{t}_transfer_fmnist": ({**{k: v for k, v in _PLGU_SMALL.items()
                                          if t == "table2" or k != "head_steps"},
                                       "size_range": "21 21"}, None)
       for t in ("table1", "table2", "table4_rho")},
    # issue 42 item 4 (verification/experiments/reproductions_ablations.py): every column of
    # the PPFE ablations; the PLGU K sweeps keep their local steps (they tell rows apart) at
    # batch 5, the label-count tables run 3 labels of 9 images per client (the small
    # CIFAR-100 has 10 images per class)
    **{f"ppfe_{t}": (SMALL_CNN, None) for t in ("table3_reduction", "table4_fixed_heads",
                                                "table5_progression", "table6_sparse")},
    **{f"plgu_{t}": ({"clients": "4", "clients_per_round": "2", "batch_size": "5"}, None)
       for t in ("table3_local_epochs", "table10_local_epochs")},
    **{f"plgu_{t}": ({k: v for k, v in _PLGU_SMALL.items() if k != "head_steps"}, None)
       for t in ("table4_rho", "table11_rho")},
    **{f"plgu_{t}": ({**{k: v for k, v in _PLGU_SMALL.items() if "global" not in t
                         or k != "head_steps"}, "size_range": "9 9",
                      "classes_per_client": "3"}, None)
       for t in ("table6_global_labels", "table7_personalized_labels",
                 "table8_global_labels", "table9_personalized_labels")},
}


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _prepare(tmp_path, real_format_data, rep):
    """Small files of each dataset of ``rep`` in one directory per dataset (a single
    --data-dir serves one dataset: the test runs the columns of one dataset at a time)."""
    return {name: real_format_data(tmp_path / name, name) for name in rep.datasets()}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_every_reproduction_end_to_end_on_small_real_format_files(name, tmp_path, capsys,
                                                                   real_format_data):
    # mutations caught: an option a row's algorithm does not have, an evaluated model the
    # method does not report (status not ok), a partition the loader refuses
    rep = REPRODUCTIONS[name]
    overrides, only = SMALL[name]
    data = _prepare(tmp_path, real_format_data, rep)
    opts = [a for k, v in overrides.items() for a in ("--option", f"{k}={v}")]
    methods = None
    if name == "cgpfl_table2_lambda":
        methods = [r.label for r in rep.rows if r.label.endswith("λ=12")]
    if any(r.algorithm == "cgpfl-heur" for r in rep.rows):
        # CGPFL-Heur's e(K) needs m > d/e samples (here ~100 < 7,850/e for MLR; the real
        # 40 clients hold ~80,000 training samples): every other row runs
        methods = [r.label for r in rep.rows if r.algorithm != "cgpfl-heur"
                   and (methods is None or r.label in methods)]
    out, runs = tmp_path / "out", tmp_path / "runs"
    for col in rep.columns:
        if only and col.key not in only:
            continue
        d, entry = data[col.data]
        argv = ["reproduce", name, "--data-dir", str(d), "--seeds", "0", "--rounds", "2",
                "--columns", col.key, "--out", str(out), "--runs-dir", str(runs), *opts]
        if methods:
            argv += ["--methods", *methods]
        if col.model == "dnn":   # CGPFL-Heur's e(K) needs m > d/e: a narrower DNN here
            argv += ["--option", "hidden=16"]
        with registry.override({col.data: entry}):
            assert main(argv) == 0
    rows = _rows(out / f"{name}.csv")
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        cmd = shlex.split(bad[0]["command"])
        log = Path(cmd[cmd.index("--out") + 1] + ".log").read_text()[-600:]
        pytest.fail(f"{[(r['method'], r['column'], r['status']) for r in bad]}: {log}")
    assert all(0.0 <= float(r["value"]) <= 1.0 and 0.0 <= float(r["best_value"]) <= 1.0
               for r in rows)
    md = (out / f"{name}.md").read_text()
    assert rep.paper in md and "| method | paper |" in md


def test_resumes_and_each_row_reruns_to_its_value(tmp_path, capsys, real_format_data):
    # mutations caught: cells re-run although in the CSV; a command that does not reproduce
    # its row (a dropped option, the value read from another key or round)
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["reproduce", "cgpfl_table1_fmnist", "--data-dir", str(d), "--seeds", "0", "1",
            "--rounds", "2", "--columns", "fmnist_mlr", "--methods", "FedAvg", "CGPFL (K=4)",
            "--out", str(out), "--runs-dir", str(runs), *SMALL_FMNIST]
    with registry.override({"fmnist": entry}):
        assert main(argv) == 0
        first = capsys.readouterr().out
        assert "0 of 4 cells already in" in first and "estimated cost" in first
        assert first.index("estimated cost") < first.index("fedavg.fmnist_mlr.s0")
        rows = _rows(out / "cgpfl_table1_fmnist.csv")
        assert len(rows) == 4 and {r["seed"] for r in rows} == {"0", "1"}
        assert {r["status"] for r in rows} == {"ok"}
        assert main(argv) == 0
        again = capsys.readouterr().out
        assert "4 of 4 cells already in" in again and "running 0" in again
        assert len(_rows(out / "cgpfl_table1_fmnist.csv")) == 4
        row = next(r for r in rows if r["method"] == "CGPFL (K=4)" and r["seed"] == "1")
        cmd = shlex.split(row["command"])
        assert cmd[:2] == ["pflt", "run"]
        redo = tmp_path / "redo"
        cmd[cmd.index("--out") + 1] = str(redo)
        assert main(cmd[1:]) == 0
    summary = json.loads((redo / "summary.json").read_text())
    assert summary[row["metric"]] == float(row["value"])
    # the two seeds differ (the seed reaches the run; the small data are easy, so the loss)
    a, b = (json.loads((runs / "cgpfl_table1_fmnist" / f"cgpfl-k-4.fmnist_mlr.s{s}" /
                        "summary.json").read_text())["personalized_loss"] for s in (0, 1))
    assert a != b and not math.isnan(a)


def test_list_dry_run_and_errors(tmp_path, capsys):
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in REPRODUCTIONS)
    assert main(["reproduce", "cgpfl_table1_fmnist", "--dry-run", "--rounds", "7", "--seeds", "4",
                 "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "18 cells" in lines[0] and len(lines) == 19
    assert all(ln.startswith("pflt run --algorithm") and "--rounds 7" in ln for ln in lines[1:])
    # the header counts the methods asked for (was the table's 9 whatever --methods said)
    assert main(["reproduce", "cgpfl_table1_fmnist", "--dry-run", "--methods", "FedAvg", "APFL",
                 "--out", str(tmp_path)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "(2 methods × 2 columns × 3 seeds)" in head and head.split(":")[1].startswith(" 12 cells")
    for bad, msg in ((["nope"], "unknown reproduction"), (["cgpfl_table1_fmnist", "--columns", "x"],
                     "unknown column"), (["cgpfl_table1_fmnist", "--option", "novalue"], "KEY=VALUE"),
                     (["cgpfl_table1_fmnist", "--data-dir", str(tmp_path / "none")], "not a directory")):
        assert main(["reproduce", *bad, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1


SMALL_RUN = ["cgpfl_table1_fmnist", "--seeds", "0", "1", "--rounds", "2", "--columns",
             "fmnist_mlr", "--methods", "fedavg", "cgpfl", *SMALL_FMNIST]


def _git(cwd, *args) -> str:
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def test_a_users_run_never_touches_the_shipped_results(tmp_path, capsys, real_format_data,
                                                       monkeypatch):
    # issue 45.1: the default wrote into paper_figures/results (tracked); mutation caught:
    # any default --out under paper_figures/results, or a documented command leaving git dirty
    import shutil

    from pflt.commands import reproduce

    root = Path(__file__).resolve().parents[2]
    repo = tmp_path / "clone"
    (repo / "paper_figures").mkdir(parents=True)
    shutil.copy(root / ".gitignore", repo / ".gitignore")
    shutil.copytree(root / "paper_figures" / "results", repo / "paper_figures" / "results",
                    ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "shipped")
    monkeypatch.setattr(reproduce, "SHIPPED", repo / "paper_figures" / "results")
    monkeypatch.chdir(repo)
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    with registry.override({"fmnist": entry}):
        for argv in (["--list"], ["cgpfl_table1_fmnist", "--dry-run"],
                     ["cgpfl_table1_fmnist", "--update-shipped", "--dry-run"],
                     [*SMALL_RUN, "--data-dir", str(d)], [*SMALL_RUN, "--data-dir", str(d)],
                     ["cgpfl_table1_fmnist", "--report"]):
            assert main(["reproduce", *argv]) == 0, argv
            assert _git(repo, "status", "--porcelain") == "", argv
    out = capsys.readouterr().out
    user = repo / "runs" / "reproduce" / "cgpfl_table1_fmnist"
    rows = _rows(user / "cgpfl_table1_fmnist.csv")
    # (CGPFL has no clients_per_round: every client trains each round)
    assert len(rows) == 4 and {(r["method"], r["options"]) for r in rows} == {
        ("FedAvg", "clients=4, clients_per_round=4, partition=label-skew, size_range=20 30"),
        ("CGPFL (K=4)", "clients=4, partition=label-skew, size_range=20 30")}
    assert "the shipped paper_figures/results/cgpfl_table1_fmnist.md is unchanged" in out
    # only the explicit flag writes the shipped table
    with registry.override({"fmnist": entry}):
        assert main(["reproduce", *SMALL_RUN, "--data-dir", str(d), "--update-shipped"]) == 0
    assert "paper_figures/results/cgpfl_table1_fmnist.csv" in _git(repo, "status", "--porcelain")


def test_dry_run_of_a_complete_table_says_nothing_is_left(tmp_path, capsys):
    # issue 45.1: "0 to run" and no command at all; mutation caught: the --force list not
    # being the table's own commands, or a failed row counted as finished
    from verification.experiments.reproduction import cells
    from verification.experiments.reproduction_run import write_rows
    from verification.experiments.reproductions import get_reproduction

    rep = get_reproduction("cgpfl_table1_fmnist")
    cs = cells(rep, seeds=[0, 1], columns=["fmnist_mlr"], methods=["FedAvg", "APFL"])
    cmds = [c.command(None, str(Path("runs") / "reproduce" / rep.name / c.run_name)) for c in cs]
    out = tmp_path / "out"
    write_rows(out / f"{rep.name}.csv", [dict(method=c.row.label, model="mlr", seed=c.seed,
                                              metric=c.metric, value="0.5", command=cmd,
                                              column="fmnist_mlr", rounds=200, status="ok")
                                         for c, cmd in zip(cs, cmds)])
    argv = ["reproduce", rep.name, "--dry-run", "--seeds", "0", "1", "--columns", "fmnist_mlr",
            "--methods", "fedavg", "apfl", "--out", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (f"nothing left to run: all 4 cells are finished in {out}/{rep.name}.csv; "
                        "with --force these 4 would run again:")
    assert lines[2:] == cmds
    rows = _rows(out / f"{rep.name}.csv")
    rows[1].update(status="exit 2", value="nan", reason="boom")
    write_rows(out / f"{rep.name}.csv", rows)
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "3 already in" in lines[0] and "1 failed before (they run again)" in lines[0]
    assert lines[1] == cmds[1] and "failed before (exit 2: boom): it runs again" in lines[2]


def test_a_failed_cell_exits_1_names_its_reason_and_runs_again(tmp_path, capsys,
                                                               real_format_data, monkeypatch):
    # issue 43.1: exit 0 with a nan row, and the next invocation skipped the failed cell;
    # mutation caught: failed commands counted as done, or the exit code ignoring failures
    from pflt.commands import reproduce

    real = reproduce._in_process_launch
    killed = []

    def launch(argv, log_path):
        if "cgpfl" in argv and argv[argv.index("--seed") + 1] == "1" and not killed:
            killed.append(argv)
            return -9
        return real(argv, log_path)

    monkeypatch.setattr(reproduce, "_in_process_launch", launch)
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    argv = ["reproduce", *SMALL_RUN, "--data-dir", str(d), "--out", str(tmp_path / "o"),
            "--runs-dir", str(tmp_path / "r")]
    csv_path, md_path = (tmp_path / "o" / f"cgpfl_table1_fmnist.{x}" for x in ("csv", "md"))
    with registry.override({"fmnist": entry}):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert ("error: CGPFL (K=4) on fmnist_mlr, seed 1: exit -9: killed by signal 9 (SIGKILL)"
                in err) and "1 of 4 cells failed" in err
        assert "| 0 (seed 1 failed) |" in md_path.read_text()
        assert main(["reproduce", *SMALL_RUN, "--data-dir", str(d), "--out", str(tmp_path / "o"),
                     "--runs-dir", str(tmp_path / "r"), "--dry-run"]) == 0
        dry = capsys.readouterr().out
        assert "1 failed before (they run again)" in dry and "cgpfl-k-4.fmnist_mlr.s1 failed" in dry
        assert main(argv) == 0
        assert "3 of 4 cells already in" in capsys.readouterr().out
    rows = _rows(csv_path)
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    assert "seed 1 failed" not in md_path.read_text() and "Incomplete" not in md_path.read_text()
