"""FedBN (algorithms/methods/decoupled/fedbn.py): on a model without normalisation layers it is FedAvg bit for
bit; on BatchNormMLP an independent per-client loop from Algorithm 1 of Li et al., ICLR 2021
(torch's F.batch_norm, autograd, uniform mean of the non-BN layers) gives the same shared
layers and the same per-client BN entries; averaging the BN layers too (FedAvg) is caught;
the CLI runs it on --model mlp-bn and refuses mlp-bn for algorithms that do not move the
BatchNorm statistics."""

import json

import numpy as np
import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.decoupled.fedbn import FedBN
from algorithms.engine.models import DNN
from algorithms.engine.models_norm import BatchNormMLP
from synthetic.federation import Federation
from verification.oracles.decoupled import fedbn_round as oracle_round

SEED = 4


def _fed():
    """5 clients, 3 classes, each client's features scaled and shifted (feature shift)."""
    rng = np.random.RandomState(3)
    sizes = [14, 30, 9, 22, 17]
    centres = rng.randn(3, 4) * 2
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [(centres[y] + rng.randn(len(y), 4)) * (1 + i) + 2 * i for i, y in enumerate(ys)]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def fed():
    return _fed()


KW = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


def test_model_without_normalisation_is_fedavg_bit_for_bit(fed):
    model = DNN(4, 3, hidden=6)
    a, b = FedBN(aggregation="weighted", **KW), FedAvg(**KW)
    sa, sb = a.init(fed, model, seed=SEED), b.init(fed, model, seed=SEED)
    for _ in range(3):
        sa, sb = a.round(sa, fed, model), b.round(sb, fed, model)
    assert sa.models["local_norm"] == {}
    assert all(torch.equal(sa.models["global"][k], sb.models["global"][k])
               for k in sb.models["global"])
    assert list(a.evaluated(sa)) == ["global"]


def _max_diff(a, b):
    return max(float((a.models[m][k] - b.models[m][k]).abs().max())
               for m in a.models for k in a.models[m])


def test_engine_equals_independent_per_client_oracle(fed):
    fed_ = fed
    model = BatchNormMLP(4, 3, hidden=(6,))
    alg = FedBN(**KW)
    engine = oracle = alg.init(fed_, model, seed=SEED)
    for _ in range(3):
        engine = alg.round(engine, fed_, model)
        oracle = oracle_round(alg, oracle, fed_, model)
    # float64: batched kernels vs F.batch_norm/F.linear on one client, ~1e-16 per op
    assert _max_diff(engine, oracle) < 1e-12
    stats = engine.models["local_norm"]["bn1.running_mean"]
    assert not torch.allclose(stats[0], stats[1])    # the clients' statistics differ


def test_averaging_the_batchnorm_layers_is_caught(fed):
    fed_ = fed
    model = BatchNormMLP(4, 3, hidden=(6,))
    alg = FedBN(**KW)
    start = alg.round(alg.init(fed_, model, seed=SEED), fed_, model)
    assert _max_diff(alg.round(start, fed_, model),
                     oracle_round(alg, start, fed_, model, average_bn=True)) > 1e-6


def test_fedbn_beats_fedavg_with_averaged_batchnorm_on_feature_shift(fed):
    """The paper's claim in the small: with each client's features scaled and shifted,
    local BN statistics help (FedAvg averages them)."""
    from algorithms.engine.evaluation import evaluate

    model = BatchNormMLP(4, 3, hidden=(16,))
    accs = {}
    for name, alg in (("fedbn", FedBN(lr=0.05, local_rounds=5, batch_size=8, clients_per_round=5)),
                      ("fedavg", FedAvg(lr=0.05, local_rounds=5, batch_size=8,
                                        clients_per_round=5))):
        s = alg.init(fed, model, seed=0)
        for _ in range(20):
            s = alg.round(s, fed, model)
        params = next(iter(alg.evaluated(s).values()))
        accs[name] = float(evaluate(model, params, fed.test)[0].mean())
    assert accs["fedbn"] > accs["fedavg"], accs


def test_cli_runs_fedbn_on_mlp_bn_and_refuses_mlp_bn_elsewhere(tmp_path, capsys):
    from pflt.cli import main

    out = tmp_path / "bn"
    code = main(["run", "--algorithm", "fedbn", "--model", "mlp-bn", "--hidden", "8",
                 "--clients", "6", "--clients-per-round", "6", "--rounds", "2",
                 "--max-client-size", "40", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    entry = json.loads((out / "history.json").read_text())["entries"][-1]
    assert 0.0 <= entry["personalized_accuracy"] <= 1.0
    assert main(["run", "--algorithm", "ditto", "--model", "mlp-bn", "--clients", "6",
                 "--rounds", "1", "--out", str(tmp_path / "d"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "does not update BatchNorm" in err and "fedbn" in err and err.count("\n") == 1


def test_flower_equals_engine_with_batchnorm(fed):
    """The registry-wide Flower test runs every algorithm on a DNN; FedBN's local BN entries
    (and FedAvg's averaged statistics) on --model mlp-bn go through Flower too."""
    pytest.importorskip("flwr")
    from algorithms.flower.local import simulate
    from algorithms.flower.records import Settings
    from algorithms.engine.models import build_model
    from algorithms.engine.runner import run

    for alg in (FedBN(**KW), FedAvg(**KW)):
        model = build_model("mlp-bn", fed, hidden=6)
        engine = run(alg, fed, model, rounds=2, seed=SEED, progress=False).state
        flower = simulate(Settings.of(alg, num_clients=fed.num_clients, seed=SEED,
                                      model="mlp-bn", hidden=6), fed, rounds=2).state
        assert _max_diff(engine, flower) < 1e-12
        assert "bn1.running_mean" in (engine.models.get("local_norm") or engine.models["global"])
