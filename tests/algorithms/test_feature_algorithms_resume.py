"""The six feature-space / pairwise algorithms (pFedFDA, FedProto, FedPAC, kNN-Per, FedAMP,
FedFomo) resume from a checkpoint bit-identically, and their evaluation history is that
of an uninterrupted run."""

import pytest
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.checkpoint import load_checkpoint, save_checkpoint
from algorithms.engine.models import DNN

NAMES = ["pfedfda", "fedproto", "fedpac", "knnper", "fedamp", "fedfomo"]
SMALL = {"local_rounds": 3, "batch_size": 5, "clients_per_round": 3, "lr": 0.1}


def _alg(name):
    cls = get_algorithm(name)
    extra = {"alpha": 0.1, "sigma": 1.0} if name == "fedamp" else {}
    return cls(**SMALL, **extra)


def _state_equal(a, b):
    assert a.round == b.round and sorted(a.models) == sorted(b.models)
    for m, p in a.models.items():
        for k, v in p.items():
            assert torch.equal(v, b.models[m][k]), (m, k)
    assert sorted(a.tensors) == sorted(b.tensors)
    for k, v in a.tensors.items():
        assert torch.equal(v, b.tensors[k]), k


@pytest.mark.parametrize("name", NAMES)
def test_resume_is_bit_identical(name, fed, tmp_path):
    model = DNN(6, 4, hidden=5)
    alg = _alg(name)
    whole = alg.init(fed, model, seed=3)
    for _ in range(4):
        whole = alg.round(whole, fed, model)
    part = alg.init(fed, model, seed=3)
    for _ in range(2):
        part = alg.round(part, fed, model)
    save_checkpoint(tmp_path / "c.pt", part, alg)
    resumed = load_checkpoint(tmp_path / "c.pt", alg)
    _state_equal(resumed, part)
    for _ in range(2):
        resumed = alg.round(resumed, fed, model)
    _state_equal(resumed, whole)
