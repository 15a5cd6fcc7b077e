"""Resume is bit-identical for FedProx, SCAFFOLD, FedBN (with and without BatchNorm), FedRoD,
FedALA, CFL (splitting from round 1, so the checkpoint holds several clusters) and FedEM: a
run checkpointed after round 2 (algorithms/engine/checkpoint.py), loaded and run on to round 4
equals the uninterrupted run — every model and tensor, client-held state (control variates,
BN statistics, label counts, ALA weights and flags, mixture weights) included."""

import numpy as np
import pytest
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.checkpoint import check_compatible, load_checkpoint, save_checkpoint
from algorithms.engine.models import DNN, BatchNormMLP
from synthetic.federation import Federation

CASES = {"fedprox": DNN(4, 3, hidden=5), "scaffold": DNN(4, 3, hidden=5),
         "fedbn": DNN(4, 3, hidden=5), "fedbn[mlp-bn]": BatchNormMLP(4, 3, hidden=(5,)),
         "fedrod": DNN(4, 3, hidden=5), "fedala": DNN(4, 3, hidden=5),
         "cfl": DNN(4, 3, hidden=5), "fedem": DNN(4, 3, hidden=5)}
EXTRA = {"cfl": dict(eps1=1e9, eps2=0.0, split_after=1, clients_per_round=3)}


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(9)
    ys = [rng.randint(0, 3, n) for n in (12, 20, 15, 18)]
    xs = [rng.randn(len(y), 4) + y[:, None] for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=1, device="cpu",
                                         dtype=torch.float64)


@pytest.mark.parametrize("case", sorted(CASES))
def test_checkpoint_resume_is_bit_identical(case, fed, tmp_path):
    model = CASES[case]
    name = case.split("[")[0]
    alg = get_algorithm(name)(**{"clients_per_round": 2, "local_rounds": 3, "batch_size": 4,
                                 **EXTRA.get(name, {})})
    whole = alg.init(fed, model, seed=3)
    for _ in range(4):
        whole = alg.round(whole, fed, model)
    part = alg.init(fed, model, seed=3)
    for _ in range(2):
        part = alg.round(part, fed, model)
    if name == "cfl":
        assert part.models["clusters"]["fc1.weight"].shape[0] >= 2
    save_checkpoint(tmp_path / "c.pt", part, alg)
    resumed = load_checkpoint(tmp_path / "c.pt", alg, device=fed.device)
    check_compatible(resumed, alg.init(fed, model, seed=3))
    for _ in range(2):
        resumed = alg.round(resumed, fed, model)
    assert resumed.round == whole.round == 4
    assert sorted(resumed.models) == sorted(whole.models)
    assert sorted(resumed.tensors) == sorted(whole.tensors)
    for m, params in whole.models.items():
        assert sorted(resumed.models[m]) == sorted(params)
        for k, v in params.items():
            assert torch.equal(resumed.models[m][k], v), (m, k)
    for k, v in whole.tensors.items():
        assert torch.equal(resumed.tensors[k], v), k
