"""Server optimisers (algorithms/methods/averaging/server_optimizers.py): FedAvgM with η = 1
and β = 0 is FedAvg's round; in Flower's reading every optimiser equals Flower's own
strategy (``flwr.server.strategy.FedAvgM / FedAdagrad / FedYogi / FedAdam``, a peer's
implementation) applied to the same client models over three rounds; the paper's reading
differs from Flower's only by v_{-1} (and FedAdam's rate); bad values are refused."""

import numpy as np
import pytest
import torch

from algorithms.engine.models import DNN
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.averaging.server_optimizers import FedAdagrad, FedAdam, FedAvgM, FedYogi
from synthetic.federation import Federation

SEED = 3
KW = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)
# float64 throughout; Flower's numpy and the engine's torch apply the same few operations
# per coordinate in another order: differences ~1e-16 relative; any changed rule moves
# the model by > 1e-4 (a 1 % change of β₂ already does, see the oracle tests)
TOL = 1e-12


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(4)
    sizes = [14, 30, 9, 22, 17]
    centres = rng.randn(3, 4) * 2
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [centres[y] + rng.randn(len(y), 4) + i * 0.3 for i, y in enumerate(ys)]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return DNN(4, 3, hidden=6)


def test_fedavgm_without_momentum_and_unit_rate_is_fedavg(fed, model):
    alg = FedAvgM(server_lr=1.0, momentum=0.0, aggregation="weighted", **KW)
    avg = FedAvg(**KW)
    s, a = alg.init(fed, model, seed=SEED), avg.init(fed, model, seed=SEED)
    for _ in range(3):
        s, a = alg.round(s, fed, model), avg.round(a, fed, model)
        for k in a.models["global"]:
            # x + (x̄ − x) against x̄: equal to rounding, not bit for bit
            assert torch.allclose(s.models["global"][k], a.models["global"][k], atol=1e-14, rtol=0)
    # with momentum the third round differs from FedAvg's
    m = FedAvgM(server_lr=1.0, momentum=0.9, aggregation="weighted", **KW)
    t = m.init(fed, model, seed=SEED)
    for _ in range(3):
        t = m.round(t, fed, model)
    assert (t.models["global"]["fc1.weight"] - a.models["global"]["fc1.weight"]).abs().max() > 1e-4


def _flower(name, init_arrays, hp):
    strategies = pytest.importorskip("flwr.server.strategy")
    from flwr.common import ndarrays_to_parameters
    params = ndarrays_to_parameters(init_arrays)
    if name == "fedavgm":
        return strategies.FedAvgM(initial_parameters=params, server_learning_rate=hp["server_lr"],
                                  server_momentum=hp["momentum"])
    cls = {"fedadagrad": strategies.FedAdagrad, "fedyogi": strategies.FedYogi,
           "fedadam": strategies.FedAdam}[name]
    kwargs = dict(initial_parameters=params, eta=hp["server_lr"], eta_l=KW["lr"], tau=hp["tau"])
    if name != "fedadagrad":        # Flower's FedAdagrad fixes β₁ = 0 (no momentum)
        kwargs.update(beta_1=hp["beta1"], beta_2=hp["beta2"])
    return cls(**kwargs)


CASES = {
    "fedavgm": (FedAvgM, dict(server_lr=0.7, momentum=0.8)),
    "fedadagrad": (FedAdagrad, dict(server_lr=0.05, beta1=0.0, tau=0.02)),   # Flower's β₁
    "fedyogi": (FedYogi, dict(server_lr=0.05, beta1=0.6, beta2=0.9, tau=0.02)),
    "fedadam": (FedAdam, dict(server_lr=0.05, beta1=0.6, beta2=0.9, tau=0.02)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_flowers_reading_equals_flowers_own_strategy(fed, model, name):
    from flwr.common import FitRes, Code, Status, ndarrays_to_parameters, parameters_to_ndarrays
    cls, hp = CASES[name]
    extra = {} if name == "fedavgm" else {"reading": "flower"}
    alg = cls(aggregation="weighted", **hp, **extra, **KW)
    avg = FedAvg(**KW)
    s = alg.init(fed, model, seed=SEED)
    keys = list(s.models["global"])
    as_arrays = lambda p: [p[k][0].numpy().copy() for k in keys]   # noqa: E731
    strategy = _flower(name, as_arrays(s.models["global"]), hp)
    for r in range(3):
        # the clients' sample-weighted mean x̄: FedAvg's round from the same x, round and seed
        mean = avg.round(s.replace(models={"global": s.models["global"]}), fed, model)
        res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(as_arrays(mean.models["global"])),
                     1, {})
        new, _ = strategy.aggregate_fit(r + 1, [(None, res)], [])
        s = alg.round(s, fed, model)
        for k, want in zip(keys, parameters_to_ndarrays(new)):
            got = s.models["global"][k][0].numpy()
            assert np.abs(got - want).max() <= TOL * max(1.0, np.abs(want).max()), (name, r, k)


def test_the_papers_v_init_differs_from_flowers(fed, model):
    """v_{-1} = τ² (paper) against 0 (Flower) moves FedYogi's first step; FedAdam's bias
    correction moves its first step too."""
    for cls in (FedYogi, FedAdam):
        paper, flower = (cls(reading=r, tau=0.02, **KW) for r in ("paper", "flower"))
        a = paper.round(paper.init(fed, model, seed=SEED), fed, model).models["global"]
        b = flower.round(flower.init(fed, model, seed=SEED), fed, model).models["global"]
        assert (a["fc1.weight"] - b["fc1.weight"]).abs().max() > 1e-6
        assert float(paper.init(fed, model, seed=SEED).models["second_moment"]["fc1.bias"][0, 0]) \
            == pytest.approx(0.02 ** 2)


@pytest.mark.parametrize("cls, bad", [
    (FedAvgM, dict(momentum=1.0)), (FedAvgM, dict(server_lr=0.0)),
    (FedAdam, dict(beta1=-0.1)), (FedAdam, dict(beta2=1.0)), (FedYogi, dict(tau=0.0)),
    (FedAdagrad, dict(reading="pytorch")), (FedAdam, dict(aggregation="median")),
    (FedAdam, dict(server_lr=float("nan"))),
])
def test_bad_values_are_refused(cls, bad):
    with pytest.raises(ValueError):
        cls(**bad)


def test_a_sampled_client_subset_only_moves_the_server_state(fed, model):
    """The optimiser's moments are server state: never sent to the clients (the phase sends
    ``global`` only) and never per-client rows."""
    alg = FedAdam(**KW)
    s = alg.init(fed, model, seed=SEED)
    assert alg.first_phase(s, fed, model).send == ("global",)
    assert all(v.shape[0] == 1 for name in ("first_moment", "second_moment")
               for v in s.models[name].values())
