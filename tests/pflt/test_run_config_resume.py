import csv
import json

import pytest
import torch

from algorithms.engine.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from pflt.cli import main

BASE = ["--clients", "12", "--local-rounds", "2", "--inner-steps", "2",
        "--clients-per-round", "3", "--no-progress", "--eval-every", "1"]


def _entries(out):
    data = json.loads((out / "history.json").read_text())["entries"]
    return [{k: v for k, v in e.items() if k != "wall_seconds"} for e in data]


def test_killed_and_resumed_run_is_bit_identical(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    assert main(["run", "--rounds", "5", "--out", str(full), "--checkpoint-every", "1"] + BASE) == 0
    # "killed" after round 3: only rounds 1-3 happened; the checkpoint is at round 3
    assert main(["run", "--rounds", "3", "--out", str(part), "--checkpoint-every", "1"] + BASE) == 0
    assert main(["run", "--resume", str(part), "--rounds", "5", "--no-progress"]) == 0
    a = load_checkpoint(full / "checkpoint.pt")
    b = load_checkpoint(part / "checkpoint.pt")
    assert a.round == b.round == 5
    for name in a.models:
        for k in a.models[name]:
            assert torch.equal(a.models[name][k], b.models[name][k])
    assert _entries(full) == _entries(part)


@pytest.mark.parametrize("options", [
    BASE + ["--train-clients", "sampled"],            # pFedMe: only the sampled clients train
    ["--algorithm", "fedavg", "--clients", "12", "--local-rounds", "2",   # train_phase's
     "--clients-per-round", "3", "--no-progress", "--eval-every", "1"]])  # sampled columns
def test_resumed_partial_participation_runs_are_bit_identical(tmp_path, options):
    full, part = tmp_path / "full", tmp_path / "part"
    assert main(["run", "--rounds", "4", "--out", str(full), "--checkpoint-every", "1"]
                + options) == 0
    assert main(["run", "--rounds", "2", "--out", str(part), "--checkpoint-every", "1"]
                + options) == 0
    assert main(["run", "--resume", str(part), "--rounds", "4", "--no-progress"]) == 0
    a, b = load_checkpoint(full / "checkpoint.pt"), load_checkpoint(part / "checkpoint.pt")
    assert a.round == b.round == 4
    for name in a.models:
        for k in a.models[name]:
            assert torch.equal(a.models[name][k], b.models[name][k])
    assert _entries(full) == _entries(part)


class _Killed(BaseException):
    """What a kill looks like to the code after it: nothing more runs."""


def test_run_killed_between_checkpoints_resumes_to_the_same_history(tmp_path, monkeypatch):
    # killed after round 3's evaluation, the last checkpoint at round 2: history.jsonl holds
    # rounds 1-3, history.json rounds 1-2; the resumed run drops round 3 (after the
    # checkpoint), replays it and ends with the uninterrupted run's files
    import algorithms.engine.runner as runner
    from pflt.aggregate import load_run

    full, part = tmp_path / "full", tmp_path / "part"
    args = ["--rounds", "5", "--checkpoint-every", "2"] + BASE
    assert main(["run", "--out", str(full)] + args) == 0
    real_run = runner.run

    def killed_at_3(*a, **kw):
        def on_round(state):
            if state.round == 3:
                raise _Killed
        return real_run(*a, **{**kw, "on_round": on_round})

    with monkeypatch.context() as m:
        m.setattr(runner, "run", killed_at_3)
        with pytest.raises(_Killed):
            main(["run", "--out", str(part)] + args)
    assert [e["round"] for e in json.loads((part / "history.json").read_text())["entries"]] \
        == [1, 2]
    assert [e["round"] for e in load_run(part).entries] == [1, 2, 3]     # pflt compare's view
    assert main(["run", "--resume", str(part), "--no-progress"]) == 0
    assert _entries(full) == _entries(part)
    lines = [json.loads(x) for x in (part / "history.jsonl").read_text().splitlines()]
    assert [e["round"] for e in lines] == [1, 2, 3, 4, 5]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rows]  # noqa: E731
    assert strip(lines) == _entries(full)
    assert strip(csv.DictReader(open(part / "history.csv"))) == \
        strip(csv.DictReader(open(full / "history.csv")))


def test_checkpoint_is_weights_only_and_checks_the_algorithm(tmp_path):
    out = tmp_path / "r"
    assert main(["run", "--rounds", "1", "--out", str(out), "--checkpoint-every", "1"] + BASE) == 0
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    assert payload["algorithm"] == "pfedme" and payload["round"] == 1
    from algorithms.methods.averaging.fedavg import FedAvg
    with pytest.raises(CheckpointError, match="from algorithm 'pfedme'"):
        load_checkpoint(out / "checkpoint.pt", FedAvg())


def test_resume_with_another_algorithm_is_refused(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--rounds", "1", "--out", str(out), "--checkpoint-every", "1"] + BASE) == 0
    before = (out / "checkpoint.pt").read_bytes()
    assert main(["run", "--resume", str(out), "--algorithm", "fedavg", "--rounds", "3"]) == 2
    assert "algorithm" in capsys.readouterr().err
    assert (out / "checkpoint.pt").read_bytes() == before  # nothing overwritten


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="refused: not a pfl-theory checkpoint"):
        load_checkpoint(bad)


def test_config_file_and_flag_override(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('algorithm = "pfedme"\nrounds = 2\nclients = 12\n'
                   '[hyperparameters]\nlam = 9.0\nlocal_rounds = 2\ninner_steps = 2\n'
                   'clients_per_round = 3\n')
    out = tmp_path / "r"
    assert main(["run", "--config", str(cfg), "--lam", "11", "--out", str(out), "--no-progress"]) == 0
    hist = json.loads((out / "history.json").read_text())
    assert hist["config"]["hyperparameters"]["lam"] == 11.0  # flag wins over the file
    assert hist["config"]["hyperparameters"]["local_rounds"] == 2  # from the file
    assert hist["entries"][-1]["round"] == 2


def test_config_with_unknown_key_is_refused(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("rounds = 2\nlearning_rate_typo = 0.1\n")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "x")]) == 2
    assert "unknown key 'learning_rate_typo'" in capsys.readouterr().err


def test_sweep_runs_grid_resumes_and_summarises(tmp_path, capsys):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('algorithm = "pfedme"\nrounds = 1\nclients = 12\nno_progress = true\n'
                   '[hyperparameters]\nlocal_rounds = 2\ninner_steps = 2\nclients_per_round = 3\n'
                   '[sweep]\nlam = [5.0, 15.0]\nseed = [0, 1]\n')
    out = tmp_path / "sw"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert len(rows) == 4 and {r["lam"] for r in rows} == {"5.0", "15.0"}
    assert all(0 <= float(r["personalized_accuracy"]) <= 1 for r in rows)
    capsys.readouterr()
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.count("skipped") == 4
    assert len((out / "sweep.jsonl").read_text().splitlines()) == 4


def test_save_load_roundtrip(tmp_path):
    from algorithms.engine.base import State
    from algorithms.methods.regularized.pfedme import PFedMe
    s = State(3, 7, {"global": {"w": torch.randn(1, 2, dtype=torch.float64)}},
              {"assign": torch.tensor([0, 1])})
    save_checkpoint(tmp_path / "c.pt", s, PFedMe())
    t = load_checkpoint(tmp_path / "c.pt", PFedMe())
    assert (t.round, t.seed) == (3, 7) and torch.equal(t.models["global"]["w"], s.models["global"]["w"])
    assert torch.equal(t.tensors["assign"], s.tensors["assign"])
    with pytest.raises(CheckpointError, match="hyper-parameters"):
        load_checkpoint(tmp_path / "c.pt", PFedMe(lam=3))
