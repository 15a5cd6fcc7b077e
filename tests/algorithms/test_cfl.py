"""CFL (algorithms/methods/clustered/cfl.py): a CFL that never splits is FedAvg bit for bit; the bipartition is
the optimum of CFL's Algorithm 1 (checked against brute force over every bipartition); an
independent per-client loop written from Algorithm 2 of Sattler et al., IEEE TNNLS 2020
(norm criteria, brute-force bipartition, weighted cluster means) gives the same clusters,
models and assignments over rounds that split; cutting the strongest instead of the
weakest link is caught; on two incongruent groups the split separates them."""


import pytest
import torch

from algorithms.methods.clustered.cfl import CFL, cosine_similarity_matrix, optimal_bipartition
from algorithms.methods.averaging.fedavg import FedAvg
from verification.oracles.clustered import (brute_force_bipartition, cfl_round as oracle_round,
                                            cfl_setting)

SEED = 2


@pytest.fixture(scope="module")
def setting():
    """6 clients in two groups whose labels are swapped (incongruent: one model cannot fit
    both), MLR — the oracle check's own setting at seed 0."""
    return cfl_setting(0)


@pytest.fixture(scope="module")
def fed(setting):
    return setting[0]


@pytest.fixture(scope="module")
def model(setting):
    return setting[1]


KW = dict(lr=0.3, local_rounds=4, batch_size=6, clients_per_round=5)


@pytest.mark.parametrize("never", [dict(eps1=0.0, eps2=0.0, split_after=0),
                                   dict(eps1=1e9, eps2=0.0, split_after=99)])
def test_never_splitting_is_fedavg_bit_for_bit(fed, model, never):
    a, b = CFL(**never, **KW), FedAvg(**KW)
    sa, sb = a.init(fed, model, seed=SEED), b.init(fed, model, seed=SEED)
    for _ in range(4):
        sa, sb = a.round(sa, fed, model), b.round(sb, fed, model)
    assert next(iter(sa.models["clusters"].values())).shape[0] == 1
    assert all(torch.equal(sa.models["clusters"][k], sb.models["global"][k])
               for k in sb.models["global"])


@pytest.mark.parametrize("seed", range(5))
def test_bipartition_is_the_brute_force_optimum(seed):
    g = torch.Generator().manual_seed(seed)
    sim = cosine_similarity_matrix(torch.randn(7, 4, generator=g, dtype=torch.float64))
    assert torch.equal(optimal_bipartition(sim), brute_force_bipartition(sim))


def _max_diff(a, b):
    assert sorted(a.models) == sorted(b.models)
    out = [float((a.models[m][k] - b.models[m][k]).abs().max())
           for m in a.models for k in a.models[m]]
    return max(out + [float((a.tensors["assignment"] != b.tensors["assignment"]).sum())])


SPLIT = dict(eps1=1e9, eps2=0.0, split_after=1)     # split every cluster of ≥ 3 from round 1


def test_engine_equals_independent_per_client_oracle(fed, model):
    alg = CFL(**SPLIT, **KW)
    engine = oracle = alg.init(fed, model, seed=SEED)
    for _ in range(4):
        engine = alg.round(engine, fed, model)
        oracle = oracle_round(alg, oracle, fed, model)
        shapes = [s.models["clusters"]["fc.weight"].shape for s in (engine, oracle)]
        assert shapes[0] == shapes[1]
    # float64: batched vs per-client SGD and means; the criteria are far from their bounds
    assert _max_diff(engine, oracle) < 1e-12
    assert engine.models["clusters"]["fc.weight"].shape[0] >= 2


def test_cutting_the_strongest_link_is_caught(fed, model):
    alg = CFL(**SPLIT, **KW)
    s = alg.round(alg.init(fed, model, seed=SEED), fed, model)
    assert _max_diff(alg.round(s, fed, model),
                     oracle_round(alg, s, fed, model, cut="strongest")) > 0.5


def test_the_first_split_separates_the_incongruent_groups(fed, model):
    alg = CFL(eps1=1e9, eps2=0.0, split_after=3, **{**KW, "clients_per_round": 6})
    s = alg.init(fed, model, seed=SEED)
    for _ in range(4):
        s = alg.round(s, fed, model)
    labels = s.tensors["assignment"].tolist()
    assert labels[0::2] == [labels[0]] * 3 and labels[1::2] == [labels[1]] * 3
    assert labels[0] != labels[1]


def test_splitting_runs_equal_client_by_client_and_under_flower(fed, model):
    """The registry-wide reference-loop and Flower tests run CFL at its defaults (no split
    within their rounds); here with splits."""
    from algorithms.reference_loop import client_by_client_round

    alg = CFL(**SPLIT, **KW)
    a = b = alg.init(fed, model, seed=SEED)
    for _ in range(3):
        a, b = alg.round(a, fed, model), client_by_client_round(alg, b, fed, model)
    assert a.models["clusters"]["fc.weight"].shape[0] >= 2
    assert _max_diff(a, b) < 1e-12
    pytest.importorskip("flwr")
    from algorithms.flower.local import simulate
    from algorithms.flower.records import Settings
    from algorithms.engine.runner import run

    engine = run(alg, fed, model, rounds=3, seed=SEED, progress=False).state
    flower = simulate(Settings.of(alg, num_clients=fed.num_clients, seed=SEED, model="mlr"),
                      fed, rounds=3).state
    assert _max_diff(engine, flower) < 1e-12
