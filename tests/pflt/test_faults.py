"""Faults survived (issue 18): the out-directory lock, resuming a run killed before its
first evaluation, a torn sweep log, a changed sweep base, a wrong-shaped checkpoint, the
curve kept by a killed run, and the data seed kept apart from the training seed."""

import json
import socket
import subprocess

import torch

from pflt.cli import main

TINY = ["--clients", "10", "--max-client-size", "30", "--no-progress", "--local-rounds", "2",
        "--inner-steps", "1"]


def _hist(out):
    return json.loads((out / "history.json").read_text())


def _kill_in_round(monkeypatch, at_round):
    """Make pfedme raise KeyboardInterrupt (a kill) when it starts round ``at_round``."""
    from algorithms.methods.regularized.pfedme import PFedMe

    real = PFedMe.round

    def round_(self, state, fed, model):
        if state.round + 1 == at_round:
            raise KeyboardInterrupt
        return real(self, state, fed, model)

    monkeypatch.setattr(PFedMe, "round", round_)


def test_second_run_on_the_same_out_is_refused_and_a_stale_lock_is_taken_over(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    holder = subprocess.Popen(["sleep", "60"])
    try:
        (out / ".lock").write_text(json.dumps({"host": socket.gethostname(),
                                               "pid": holder.pid}))
        assert main(["run", "--out", str(out), "--rounds", "1", *TINY]) == 2
        assert "in use by another run" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert main(["run", "--out", str(out), "--rounds", "1", *TINY]) == 0  # owner gone
    assert "stale lock" in capsys.readouterr().err
    assert not (out / ".lock").exists()  # released after the run


def test_run_killed_before_its_first_evaluation_can_be_resumed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    _kill_in_round(monkeypatch, 1)
    assert main(["run", "--out", str(out), "--rounds", "2", "--checkpoint-every", "1",
                 *TINY]) == 130
    assert _hist(out)["entries"] == [] and _hist(out)["initial_evaluation"]
    assert not (out / ".lock").exists()
    monkeypatch.undo()
    assert main(["run", "--resume", str(out)]) == 0
    assert "running again from round 0" in capsys.readouterr().err
    assert [e["round"] for e in _hist(out)["entries"]] == [1, 2]


def test_killed_run_keeps_the_curve_computed_so_far(tmp_path, monkeypatch):
    out = tmp_path / "o"
    _kill_in_round(monkeypatch, 3)
    assert main(["run", "--out", str(out), "--rounds", "4", *TINY]) == 130
    assert [e["round"] for e in _hist(out)["entries"]] == [1, 2]


def test_wrong_shaped_checkpoint_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--out", str(out), "--rounds", "1", "--checkpoint-every", "1",
                 *TINY]) == 0
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    name = next(iter(payload["models"]))
    key = next(iter(payload["models"][name]))
    t = payload["models"][name][key]
    payload["models"][name][key] = torch.zeros(t.shape[0], *(s + 1 for s in t.shape[1:]))
    torch.save(payload, out / "checkpoint.pt")
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--rounds", "2"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and "layout: does not match the digest" in err[0]
    # the same edit with the digest written again (a deliberate editor): the shape check
    from algorithms.engine.checkpoint import _digest, layout
    payload["digests"]["layout"] = _digest(layout(payload["models"], payload["tensors"]))
    torch.save(payload, out / "checkpoint.pt")
    assert main(["run", "--resume", str(out), "--rounds", "2"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and "has shape" in err[0]


def _sweep(tmp_path, text, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text(text)
    code = main(["sweep", str(cfg), "--out", str(tmp_path / "sw"), "--no-progress"])
    return code, capsys.readouterr()


BASE = ('clients = 10\nmax_client_size = 30\nrounds = 1\nlocal_rounds = 1\ninner_steps = 1\n'
        '[sweep]\nseed = [0, 1]\n')


def test_sweep_drops_a_torn_last_line_and_resumes(tmp_path, capsys):
    assert _sweep(tmp_path, BASE, capsys)[0] == 0
    log = tmp_path / "sw" / "sweep.jsonl"
    lines = log.read_text().splitlines()
    log.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write
    code, cap = _sweep(tmp_path, BASE, capsys)
    assert code == 0 and "torn last line" in cap.err
    assert cap.out.count("done, skipped") == 1  # point 1 reused, point 2 ran again
    assert len(log.read_text().splitlines()) == 2
    assert all(json.loads(x)["point"] for x in log.read_text().splitlines())


def test_sweep_with_a_corrupt_middle_line_is_refused(tmp_path, capsys):
    assert _sweep(tmp_path, BASE, capsys)[0] == 0
    log = tmp_path / "sw" / "sweep.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("garbage\n" + "\n".join(lines) + "\n")
    code, cap = _sweep(tmp_path, BASE, capsys)
    assert code == 2 and "line 1 is not a sweep record" in cap.err


def test_sweep_reruns_points_when_the_base_configuration_changes(tmp_path, capsys):
    assert _sweep(tmp_path, BASE, capsys)[0] == 0
    code, cap = _sweep(tmp_path, BASE, capsys)
    assert code == 0 and cap.out.count("done, skipped") == 2
    code, cap = _sweep(tmp_path, BASE.replace("rounds = 1", "rounds = 2"), capsys)
    assert code == 0 and "done, skipped" not in cap.out and "run again" in cap.err
    finals = [json.loads(x)["final"]["round"]
              for x in (tmp_path / "sw" / "sweep.jsonl").read_text().splitlines()]
    assert finals[-2:] == [2, 2]


def test_data_seed_is_fixed_while_the_training_seed_varies(tmp_path):
    runs = {}
    for name, extra in {"s0": [], "s1": ["--seed", "1"], "d1": ["--data-seed", "1"]}.items():
        out = tmp_path / name
        assert main(["run", "--out", str(out), "--rounds", "1", *TINY, *extra]) == 0
        runs[name] = (_hist(out), json.loads((out / "run_options.json").read_text()))
    (h0, o0), (h1, o1), (_, od) = runs["s0"], runs["s1"], runs["d1"]
    assert (o0["seed"], o0["data_seed"]) == (0, 0) and (o1["seed"], o1["data_seed"]) == (1, 0)
    assert od["data_seed"] == 1 and h1["config"]["data"]["seed"] == 0
    # the data each run used (rebuilt from its saved options): equal for seeds 0 and 1,
    # different for data seed 1; the training differs (round-0 models differ)
    from pflt.commands.run_options import data_spec
    from synthetic.sources import build_federation

    x0, x1, xd = (build_federation(data_spec(o), device="cpu").train.x for o in (o0, o1, od))
    assert torch.equal(x0, x1) and (x0.shape != xd.shape or not torch.equal(x0, xd))
    assert h0["initial_evaluation"] != h1["initial_evaluation"]


def test_run_saved_before_data_seed_existed_resumes_on_its_own_data(tmp_path):
    """Old run_options.json (no data_seed): the data came from --seed, so resume uses it."""
    out = tmp_path / "o"
    assert main(["run", "--out", str(out), "--rounds", "1", "--seed", "3", "--data-seed", "3",
                 "--checkpoint-every", "1", *TINY]) == 0
    saved = json.loads((out / "run_options.json").read_text())
    for key in ("data_seed", "class_assignment", "replace"):
        del saved[key]
    (out / "run_options.json").write_text(json.dumps(saved))
    # the files of that time: a checkpoint without the run's configuration (format 1), a
    # history whose configuration lacks the options added since
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    for key in ("config", "digests"):
        del payload[key]
    torch.save({**payload, "format": "pfl-theory-checkpoint-1"}, out / "checkpoint.pt")
    hist = json.loads((out / "history.json").read_text())
    del hist["config"]["data_seed"]
    for key in ("class_assignment", "replace"):
        del hist["config"]["data"][key]
    (out / "history.json").write_text(json.dumps(hist))
    assert main(["run", "--resume", str(out), "--rounds", "2"]) == 0
    resumed = json.loads((out / "run_options.json").read_text())
    assert resumed["data_seed"] == 3 and resumed["class_assignment"] == "random"
