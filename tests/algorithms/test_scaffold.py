"""SCAFFOLD (algorithms/methods/averaging/scaffold.py): zero control variates give FedAvg's round bit for bit;
K = 1 makes c_i⁺ the mini-batch gradient; an independent per-client loop written from
Algorithm 1 (option II) of Karimireddy et al., ICML 2020, gives the same x, c and c_i over
two rounds with partial participation; wrong option-II signs are caught."""

import numpy as np
import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import DNN
from algorithms.methods.averaging.scaffold import Scaffold
from synthetic.federation import Federation
from verification.oracles.averaging import scaffold_round as oracle_round

SEED = 5


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(2)
    sizes = [14, 30, 9, 22, 17]
    centres = rng.randn(3, 4) * 2
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [centres[y] + rng.randn(len(y), 4) + i * 0.3 for i, y in enumerate(ys)]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return DNN(4, 3, hidden=6)


KW = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


@pytest.mark.parametrize("steps", [1, 3])
def test_zero_control_variates_give_fedavg_bit_for_bit(fed, model, steps):
    kw = {**KW, "local_rounds": steps}
    alg, avg = Scaffold(aggregation="weighted", **kw), FedAvg(**kw)
    s = alg.round(alg.round(alg.init(fed, model, seed=SEED), fed, model), fed, model)
    # control variates are nonzero now; zero them and compare one round from the same x
    assert float(s.models["control"]["fc1.weight"].abs().max()) > 0
    zero = {k: {n: torch.zeros_like(v) for n, v in s.models[k].items()}
            for k in ("control", "client_control")}
    got = alg.round(s.replace(models={**s.models, **zero}), fed, model).models["global"]
    want = avg.round(s.replace(models={"global": s.models["global"]}), fed, model)
    assert all(torch.equal(got[k], want.models["global"][k]) for k in got)
    # and the first round of a run is FedAvg's first round
    first = alg.round(alg.init(fed, model, seed=SEED), fed, model).models["global"]
    first_avg = avg.round(avg.init(fed, model, seed=SEED), fed, model).models["global"]
    assert all(torch.equal(first[k], first_avg[k]) for k in first)
    # with the controls kept, round 3 is not FedAvg's
    kept = alg.round(s, fed, model).models["global"]
    assert not torch.equal(kept["fc1.weight"], want.models["global"]["fc1.weight"])


def test_one_local_step_makes_the_client_control_the_minibatch_gradient(fed, model):
    alg = Scaffold(**{**KW, "local_rounds": 1, "clients_per_round": 5})
    s0 = alg.init(fed, model, seed=SEED)
    s1 = alg.round(s0, fed, model)
    batches = fed.sample_batches(1, alg.batch_size, s0.generator())
    x = {k: v.expand(5, *v.shape[1:]) for k, v in s0.models["global"].items()}
    g, _ = model.autograd_grad(x, *fed.train.gather(batches[0]))
    for k, v in g.items():
        # (x − (x − η g))/η: two roundings of numbers of size |x|, divided by η = 0.1
        torch.testing.assert_close(s1.models["client_control"][k], v, rtol=0, atol=1e-13)


def _max_diff(a, b):
    return max(float((a.models[m][k] - b.models[m][k]).abs().max())
               for m in a.models for k in a.models[m])


def test_engine_equals_independent_per_client_oracle(fed, model):
    alg = Scaffold(global_lr=0.8, **KW)
    engine = oracle = alg.init(fed, model, seed=SEED)
    for _ in range(3):
        engine = alg.round(engine, fed, model)
        oracle = oracle_round(alg, oracle, fed, model)
    # float64; x + η_g mean Δy vs (1 − η_g) x + η_g mean y, and (x − y)/(Kη): ~1e-15
    assert _max_diff(engine, oracle) < 1e-12
    # the control variates compared are not zeros
    assert float(engine.models["control"]["fc2.bias"].abs().max()) > 0


def test_wrong_option_two_sign_is_caught(fed, model):
    alg = Scaffold(**KW)
    start = alg.round(alg.init(fed, model, seed=SEED), fed, model)   # c ≠ 0 from here on
    assert _max_diff(alg.round(start, fed, model), oracle_round(alg, start, fed, model,
                                                                flip=True)) > 1e-6


def test_bad_aggregation_is_refused():
    with pytest.raises(ValueError, match="aggregation"):
        Scaffold(aggregation="median")
