"""FedProx (algorithms/methods/averaging/fedprox.py): μ = 0 is FedAvg bit for bit; an independent per-client
loop written from the paper (Li et al., MLSys 2020, eq. 2 and Algorithm 2) gives the same
parameters; a wrong-sign proximal term is caught by that comparison; μ pulls the local
models towards w^t."""

import numpy as np
import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.averaging.fedprox import FedProx, proximal_sgd
from algorithms.engine.models import DNN
from synthetic.federation import Federation
from verification.oracles.averaging import fedprox_round as oracle_round

SEED = 3


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(1)
    sizes = [14, 30, 9, 22, 17]
    centres = rng.randn(3, 4) * 2
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [centres[y] + rng.randn(len(y), 4) for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return DNN(4, 3, hidden=6)


def _rounds(alg, fed, model, n):
    s = alg.init(fed, model, seed=SEED)
    for _ in range(n):
        s = alg.round(s, fed, model)
    return s


def test_mu_zero_is_fedavg_bit_for_bit(fed, model):
    kw = dict(lr=0.1, local_rounds=4, batch_size=5, clients_per_round=3)
    a = _rounds(FedProx(mu=0.0, **kw), fed, model, 3).models["global"]
    b = _rounds(FedAvg(**kw), fed, model, 3).models["global"]
    assert all(torch.equal(a[k], b[k]) for k in b)
    c = _rounds(FedProx(mu=0.5, **kw), fed, model, 3).models["global"]
    assert not torch.equal(c["fc1.weight"], b["fc1.weight"])     # μ > 0 does change it


def _max_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_engine_equals_independent_per_client_oracle(fed, model):
    alg = FedProx(mu=0.7, lr=0.1, local_rounds=3, batch_size=6, clients_per_round=3)
    engine = oracle = alg.init(fed, model, seed=SEED)
    for _ in range(2):
        engine = alg.round(engine, fed, model)
        oracle = oracle_round(alg, oracle, fed, model)
    # float64; batched vs one-row kernels and a differently ordered weighted sum: ~1e-16
    assert _max_diff(engine.models["global"], oracle.models["global"]) < 1e-12


def test_wrong_sign_of_the_proximal_term_is_caught(fed, model):
    alg = FedProx(mu=0.7, lr=0.1, local_rounds=3, batch_size=6, clients_per_round=3)
    start = alg.init(fed, model, seed=SEED)
    start = alg.round(start, fed, model)      # w^t ≠ w after a step, so the term is nonzero
    engine = alg.round(start, fed, model)
    wrong = oracle_round(alg, start, fed, model, sign=-1.0)
    assert _max_diff(engine.models["global"], wrong.models["global"]) > 1e-6


def test_large_mu_keeps_local_models_near_the_anchor(fed, model):
    w0 = model.init(2, seed=1, dtype=torch.float64)
    x, y = fed.train.gather(fed.sample_batches(5, 4, torch.Generator().manual_seed(0))[:, :2])
    dist = []
    for mu in (0.0, 1.0, 8.0):
        w = proximal_sgd(model, w0, w0, x, y, lr=0.1, mu=mu)
        dist.append(sum(float(((w[k] - w0[k]) ** 2).sum()) for k in w))
    assert dist[0] > dist[1] > dist[2] > 0


def test_negative_mu_is_refused():
    with pytest.raises(ValueError, match="mu"):
        FedProx(mu=-0.1)
