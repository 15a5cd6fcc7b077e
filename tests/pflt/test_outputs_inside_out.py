"""Issue 23, deliverable 3: outputs stay inside ``--out``.  No command deletes what it did
not create, writes through a link planted in ``--out``, runs twice on one locked ``--out``,
or leaves half a file / a large temporary when the disk fills up (simulated by making
every write of :mod:`pfl_theory.safe_files` fail with ENOSPC)."""

from __future__ import annotations

import errno
import json
import os
import socket

import pytest
import torch

from pfl_theory import safe_files
from pflt.cli import main
from verification.core import registry
from verification.core import runner
from verification.core.registry import Outcome, check

TINY = ["--algorithm", "fedavg", "--clients", "4", "--clients-per-round", "2",
        "--local-rounds", "1", "--max-client-size", "20", "--no-progress"]


@pytest.fixture
def one_check(monkeypatch):
    """An isolated registry with one quick check that writes a figure file."""
    saved = dict(registry._REGISTRY)
    registry._REGISTRY.clear()
    monkeypatch.setattr(runner, "load_checks", lambda package="verification.checks", **_:
                        (dict(registry._REGISTRY), {}))

    @check("fake.draws", paper="P", reference="eq. (1)", kind="identity")
    def draws(ctx):
        path = ctx.out_dir / "curve.csv"
        path.write_text("x,y\n1,2\n")
        return Outcome(measured=1.0, theoretical=1.0, holds=True, figures=(str(path),))

    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def _one_line(capsys, code, expected_code=2, *needles):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert code == expected_code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


def _no_temporaries(out):
    left = [p for p in out.rglob("*") if p.name.endswith(".tmp") or ".pflt-staging" in str(p)]
    assert left == [], left


# ---- verify never deletes what it did not create --------------------------------------

def test_verify_keeps_user_files_and_replaces_only_its_own(one_check, tmp_path, capsys):
    out = tmp_path / "v"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "notes.txt").write_text("mine")          # the user's
    (out / "figures" / "fake.old" / "seed0").mkdir(parents=True)
    (out / "figures" / "fake.old" / "seed0" / "plot.png").write_bytes(b"mine too")
    assert main(["verify", "--quick", "--out", str(out), "--no-progress"]) == 0
    assert (out / "figures" / "notes.txt").read_text() == "mine"
    assert (out / "figures" / "fake.old" / "seed0" / "plot.png").read_bytes() == b"mine too"
    assert (out / "figures" / "fake.draws" / "seed0" / "curve.csv").is_file()
    # a later run that no longer writes fake.draws removes that file (it created it) only
    registry._REGISTRY.pop("fake.draws")

    @check("fake.plain", paper="P", reference="eq. (2)", kind="identity")
    def plain(ctx):
        return Outcome(measured=1.0, theoretical=1.0, holds=True)

    assert main(["verify", "--quick", "--out", str(out), "--no-progress"]) == 0
    assert not (out / "figures" / "fake.draws").exists()
    assert (out / "figures" / "notes.txt").read_text() == "mine"
    assert (out / "figures" / "fake.old" / "seed0" / "plot.png").is_file()
    assert [c["id"] for c in json.loads((out / "results.json").read_text())["checks"]] \
        == ["fake.plain"]
    _no_temporaries(out)


@pytest.mark.parametrize("planted", ["report.md", "results.json", "figures",
                                     "figures/fake.draws"])
def test_verify_refuses_links_planted_in_out(one_check, tmp_path, capsys, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched")
    out = tmp_path / "v"
    (out / planted).parent.mkdir(parents=True, exist_ok=True)
    target = outside if planted.startswith("figures") else outside / "keep.txt"
    (out / planted).symlink_to(target)
    code = main(["verify", "--quick", "--out", str(out), "--no-progress"])
    _one_line(capsys, code, 2, "symbolic link")
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "untouched"
    _no_temporaries(out)


def test_verify_on_a_full_disk_keeps_the_previous_outputs(one_check, tmp_path, capsys,
                                                          monkeypatch):
    out = tmp_path / "v"
    assert main(["verify", "--quick", "--out", str(out), "--no-progress"]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_files, "os_write", no_space)
    capsys.readouterr()
    code = main(["verify", "--quick", "--out", str(out), "--no-progress"])
    _one_line(capsys, code, 2, "No space left on device")
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()
             and "partial" not in p.relative_to(out).parts}
    assert after == before             # not one file of the new run published
    # what finished before the disk filled is kept for a resume (verification/core/progress.py)
    assert (out / "partial" / "progress.jsonl").is_file()
    _no_temporaries(out)


def test_verify_only_with_no_pattern_is_an_error(capsys):
    code = main(["verify", "--only", ",", "--quick"])
    _one_line(capsys, code, 2, "names no pattern")


# ---- every writing command locks --out -------------------------------------------------

def _hold_lock(out, pid):
    out.mkdir(parents=True, exist_ok=True)
    (out / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": pid}))


COMMANDS = {
    "run": lambda out, tmp: ["run", *TINY, "--rounds", "1", "--out", str(out)],
    "verify": lambda out, tmp: ["verify", "--quick", "--out", str(out), "--no-progress"],
    "figures": lambda out, tmp: ["figures", "--only", "verification_summary", "--out",
                                 str(out), "--no-progress"],
    "compare": lambda out, tmp: ["compare", str(tmp / "r"), "--out", str(out)],
    "sweep": lambda out, tmp: ["sweep", str(tmp / "s.toml"), "--out", str(out),
                               "--no-progress"],
    "flower-sim": lambda out, tmp: ["flower-sim", *TINY, "--rounds", "1", "--out", str(out)],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_writing_command_refuses_a_locked_out(command, one_check, tmp_path, capsys):
    if command == "flower-sim":
        pytest.importorskip("flwr")
    if command == "compare":
        assert main(["run", *TINY, "--rounds", "1", "--out", str(tmp_path / "r")]) == 0
    (tmp_path / "s.toml").write_text("algorithm = 'fedavg'\nclients = 4\nclients_per_round = 2\n"
                                     "rounds = 1\n[sweep]\nseed = [0]\n")
    out = tmp_path / "o"
    _hold_lock(out, os.getppid())          # a live process on this host holds OUT
    capsys.readouterr()
    code = main(COMMANDS[command](out, tmp_path))
    _one_line(capsys, code, 2, "in use by another run")
    assert sorted(p.name for p in out.iterdir()) == [".lock"]   # nothing written


# ---- run: links and a full disk --------------------------------------------------------

def test_run_refuses_a_link_planted_at_one_of_its_files(tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_text("user data")
    out = tmp_path / "r"
    out.mkdir()
    (out / "history.json").symlink_to(outside)
    code = main(["run", *TINY, "--rounds", "1", "--out", str(out)])
    _one_line(capsys, code, 2, "symbolic link")
    assert outside.read_text() == "user data"


def test_run_on_a_full_disk_keeps_its_checkpoint_and_resumes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    real = safe_files.os_write

    def full_after_first_checkpoint(fd, data):
        if (out / "checkpoint.pt").exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    with monkeypatch.context() as m:
        m.setattr(safe_files, "os_write", full_after_first_checkpoint)
        code = main(["run", *TINY, "--rounds", "3", "--checkpoint-every", "1",
                     "--out", str(out)])
    _one_line(capsys, code, 2, "No space left on device")
    assert torch.load(out / "checkpoint.pt", weights_only=True)["round"] == 1
    json.loads((out / "history.json").read_text())          # whole, not half-written
    _no_temporaries(out)
    assert not (out / ".lock").exists()
    # the disk has room again: the run continues from its checkpoint
    assert main(["run", "--resume", str(out), "--no-progress"]) == 0
    assert json.loads((out / "summary.json").read_text())["round"] == 3


def test_compare_on_a_full_disk_keeps_the_previous_table(tmp_path, capsys, monkeypatch):
    run = tmp_path / "r"
    assert main(["run", *TINY, "--rounds", "1", "--out", str(run)]) == 0
    out = tmp_path / "c"
    assert main(["compare", str(run), "--out", str(out)]) == 0
    before = (out / "compare.csv").read_text()

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_files, "os_write", no_space)
    capsys.readouterr()
    code = main(["compare", str(run), "--at", "best", "--out", str(out)])
    _one_line(capsys, code, 2, "No space left on device")
    assert (out / "compare.csv").read_text() == before
    _no_temporaries(out)


def test_sweep_refuses_a_point_directory_linked_outside(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cfg = tmp_path / "s.toml"
    cfg.write_text("algorithm = 'fedavg'\nclients = 4\nclients_per_round = 2\nrounds = 1\n"
                   "[sweep]\nseed = [0]\n")
    out = tmp_path / "sw"
    out.mkdir()
    (out / "point-000").symlink_to(elsewhere, target_is_directory=True)
    code = main(["sweep", str(cfg), "--out", str(out), "--no-progress"])
    _one_line(capsys, code, 2, "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_the_python_apis_clear_previous_removes_only_listed_figures(tmp_path):
    # verification.runner.run_and_report(out_dir=...) without pflt: it used to
    # rmtree(out_dir/figures), the user's files included
    out = tmp_path / "v"
    (out / "figures" / "c.x" / "seed0").mkdir(parents=True)
    (out / "figures" / "c.x" / "seed0" / "ours.png").write_bytes(b"")
    (out / "figures" / "notes.txt").write_text("mine")
    (out / "results.json").write_text(json.dumps(
        {"checks": [{"figures": ["figures/c.x/seed0/ours.png", "../../escape.txt"]}]}))
    (tmp_path / "escape.txt").write_text("keep")
    runner.clear_previous(out)
    assert not (out / "figures" / "c.x").exists() and not (out / "results.json").exists()
    assert (out / "figures" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "escape.txt").read_text() == "keep"
