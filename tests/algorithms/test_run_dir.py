"""A fresh run never mixes its files with another run's (algorithms/engine/run_dir.py)."""

import json

import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import MLR
from algorithms.methods.regularized.pfedme import PFedMe
from algorithms.engine.run_dir import RunDirectoryError
from algorithms.engine.runner import run
from synthetic.federation import Federation


@pytest.fixture(scope="module")
def fed():
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(20, 4, generator=gen, dtype=torch.float64).numpy() for _ in range(3)]
    ys = [torch.randint(0, 2, (20,), generator=gen).numpy() for _ in range(3)]
    return Federation.from_client_arrays(xs, ys, num_classes=2, device="cpu", dtype=torch.float64)


def _run(alg, fed, out, **kw):
    return run(alg, fed, MLR(4, 2), rounds=2, out_dir=out, progress=False, **kw)


def test_another_algorithm_in_the_same_directory_is_refused(fed, tmp_path):
    _run(PFedMe(local_rounds=1, inner_steps=1, clients_per_round=2), fed, tmp_path,
         checkpoint_every=1)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RunDirectoryError, match="holds another run .algorithm: \"pfedme\""):
        _run(FedAvg(local_rounds=1, clients_per_round=2), fed, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before   # untouched


def test_other_hyperparameters_are_named(fed, tmp_path):
    _run(FedAvg(local_rounds=1, clients_per_round=2), fed, tmp_path)
    with pytest.raises(RunDirectoryError, match="hyperparameters.local_rounds: 1, this run: 2"):
        _run(FedAvg(local_rounds=2, clients_per_round=2), fed, tmp_path)


def test_overwrite_replaces_the_earlier_run_files_only(fed, tmp_path):
    _run(PFedMe(local_rounds=1, inner_steps=1, clients_per_round=2), fed, tmp_path,
         checkpoint_every=1)
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    _run(FedAvg(local_rounds=1, clients_per_round=2), fed, tmp_path, overwrite=True)
    assert not (tmp_path / "checkpoint.pt").exists() and not (tmp_path / "summary.json").exists()
    assert json.loads((tmp_path / "history.json").read_text())["config"]["algorithm"] == "fedavg"
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_same_run_started_again_drops_its_stale_checkpoint(fed, tmp_path):
    alg = FedAvg(local_rounds=1, clients_per_round=2)
    run(alg, fed, MLR(4, 2), rounds=4, out_dir=tmp_path, progress=False, checkpoint_every=1)
    _run(alg, fed, tmp_path)     # same configuration, no checkpoints this time
    assert not (tmp_path / "checkpoint.pt").exists()   # the round-4 one would mix with it
    assert [e["round"] for e in json.loads((tmp_path / "history.json").read_text())["entries"]] \
        == [1, 2]


def test_an_unreadable_run_is_not_replaced_silently(fed, tmp_path):
    (tmp_path / "history.json").write_text("[1, 2")
    with pytest.raises(RunDirectoryError, match="cannot be read"):
        _run(FedAvg(local_rounds=1, clients_per_round=2), fed, tmp_path)
    assert (tmp_path / "history.json").read_text() == "[1, 2"
