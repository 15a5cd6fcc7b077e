"""Checkpoints: records under digests, forms checked, layouts checked (algorithms/engine/checkpoint.py)."""

import pytest
import torch

from algorithms.engine.base import State
from algorithms.engine.checkpoint import (CheckpointError, _digest, check_layout, layout,
                                   load_checkpoint, read_payload, save_checkpoint)
from algorithms.methods.averaging.fedavg import FedAvg

STATE = State(3, 7, {"global": {"w": torch.zeros(1, 2, 2)}, "local": {"w": torch.ones(4, 2, 2)}},
              {"assignment": torch.zeros(4, dtype=torch.long)})


def test_round_trip_with_config(tmp_path):
    save_checkpoint(tmp_path / "c.pt", STATE, FedAvg(), {"data_seed": 2})
    p = read_payload(tmp_path / "c.pt")
    assert p["round"] == 3 and p["seed"] == 7 and p["config"] == {"data_seed": 2}
    s = load_checkpoint(tmp_path / "c.pt", FedAvg())
    assert torch.equal(s.models["local"]["w"], STATE.models["local"]["w"])


@pytest.mark.parametrize("key, value", [("round", 4), ("seed", 8), ("algorithm", "ditto"),
                                        ("config", '{"data_seed": 3}')])
def test_a_record_edited_without_its_digest_is_refused_by_name(tmp_path, key, value):
    save_checkpoint(tmp_path / "c.pt", STATE, FedAvg(), {"data_seed": 2})
    payload = torch.load(tmp_path / "c.pt", weights_only=True)
    payload[key] = value
    torch.save(payload, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match=f"c.pt: {key}: does not match the digest"):
        read_payload(tmp_path / "c.pt")


def test_a_dtype_swapped_without_its_digest_is_refused(tmp_path):
    save_checkpoint(tmp_path / "c.pt", STATE, FedAvg())
    payload = torch.load(tmp_path / "c.pt", weights_only=True)
    payload["models"]["local"]["w"] = payload["models"]["local"]["w"].double()
    torch.save(payload, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="layout: does not match the digest"):
        read_payload(tmp_path / "c.pt")


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.pop("models"), "models: missing"),
    (lambda p: p.update(round="3"), "round: expected int"),
    (lambda p: p.update(models={"local": [1]}), "models.local: expected a dict of tensors"),
    (lambda p: p.update(tensors={"a": 1}), "tensors.a: expected a tensor"),
])
def test_the_form_of_each_key(tmp_path, edit, message):
    save_checkpoint(tmp_path / "c.pt", STATE, FedAvg())
    payload = torch.load(tmp_path / "c.pt", weights_only=True)
    edit(payload)
    torch.save(payload, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match=message):
        read_payload(tmp_path / "c.pt")


def _with(models=None, tensors=None):
    return State(3, 7, {**STATE.models, **(models or {})}, {**STATE.tensors, **(tensors or {})})


@pytest.mark.parametrize("state, message", [
    (_with({"local": {"w": torch.ones(3, 2, 2)}}), "local.w has 3 rows, this run has 4 clients"),
    (_with({"local": {"w": torch.ones(4, 2, 2, dtype=torch.float64)}}), "dtype torch.float64"),
    (_with({"local": {"w": torch.ones(4, 2, 3)}}), "has shape"),
    (_with({"extra": {"w": torch.ones(1, 2, 2)}}), "holds models"),
    (State(3, 7, STATE.models, {}), "tensors.assignment: missing"),
    (_with(tensors={"assignment": torch.zeros(3, dtype=torch.long)}), "assignment has 3 rows"),
])
def test_check_layout(state, message):
    with pytest.raises(CheckpointError, match=message):
        check_layout(state, STATE, "c.pt", num_clients=4, client_models=("local",))
    check_layout(STATE, STATE, "c.pt", num_clients=4, client_models=("local",))  # itself fits


def test_a_context_count_may_change_but_not_the_client_count():
    """CGPFL-Heur's contexts go from 1 to K̂: a leading dimension other than N may differ."""
    grown = _with({"global": {"w": torch.zeros(3, 2, 2)}})
    check_layout(grown, STATE, "c.pt", num_clients=4, client_models=("local",))
    assert _digest(layout(grown.models, grown.tensors)) != _digest(layout(STATE.models,
                                                                          STATE.tensors))


class _Hostile:
    """A pickle that would run a command when loaded unsafely."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def _hostile_pickle(path, marker):
    torch.save({"format": 2, "x": _Hostile(marker)}, path)


@pytest.mark.parametrize("content", ["empty", "random", "hostile", "truncated", "text"])
def test_a_damaged_or_unsafe_file_is_refused_without_unsafe_advice(tmp_path, content):
    """An empty file said "cannot read checkpoint …:" with nothing after the colon, random
    bytes "list index out of range", a hostile pickle torch's advice cut off at "Re-running
    `torch.load` with `weights_only` set to `False`"."""
    import os

    path, marker = tmp_path / "checkpoint.pt", tmp_path / "pwned"
    if content == "empty":
        path.write_bytes(b"")
    elif content == "random":
        path.write_bytes(os.urandom(4096))
    elif content == "text":
        path.write_text("not a checkpoint\n")
    elif content == "hostile":
        _hostile_pickle(path, marker)
    else:
        save_checkpoint(path, State(1, 0, {"m": {"w": torch.ones(3, 2)}}, {}), FedAvg())
        path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f"{path}: refused: not a pfl-theory checkpoint (unsafe or damaged")
    assert "weights_only" not in message and "\n" not in message
    assert not marker.exists()


def test_resume_from_a_hostile_checkpoint_is_one_line(tmp_path, capsys):
    from pflt.cli import main

    out = tmp_path / "run"
    argv = ["run", "--algorithm", "fedavg", "--clients", "3", "--clients-per-round", "3",
            "--rounds", "2", "--checkpoint-every", "1", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    _hostile_pickle(out / "checkpoint.pt", tmp_path / "pwned")
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--rounds", "3", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pflt run: error:") and "\n" not in err
    assert "refused: not a pfl-theory checkpoint (unsafe or damaged" in err
    assert not (tmp_path / "pwned").exists()
