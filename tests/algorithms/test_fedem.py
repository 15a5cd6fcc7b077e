"""FedEM (algorithms/methods/clustered/fedem.py): one component is FedAvg bit for bit; an independent
per-client loop written from Algorithm 1 of Marfoq et al., NeurIPS 2021 (E-step eq. 5 and
π update eq. 6 on every local sample, q-weighted SGD per component with the E-step's q
looked up by sample index, weighted server mean) gives the same components and weights;
training the components unweighted is caught; the evaluated predictor is the π-mixture of
the components' probabilities; the engine hands FedEM its participants' train split."""

import numpy as np
import pytest
import torch

from algorithms.engine.contract import participant_split
from algorithms.engine.evaluation import evaluate, model_for
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.clustered.fedem import FedEM, Mixture
from algorithms.engine.models import DNN
from synthetic.federation import Federation
from verification.oracles.clustered_soft import fedem_round as oracle_round

SEED = 11


@pytest.fixture(scope="module")
def fed():
    """5 clients drawing from two label maps in different proportions (a mixture)."""
    rng = np.random.RandomState(8)
    centres = rng.randn(3, 4) * 2
    xs, ys = [], []
    for i, share in enumerate([0.0, 0.25, 0.5, 0.75, 1.0]):
        y = rng.randint(0, 3, 16 + 4 * i)
        x = centres[y] + rng.randn(len(y), 4)
        flip = rng.rand(len(y)) < share
        xs.append(x)
        ys.append(np.where(flip, (y + 1) % 3, y))
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return DNN(4, 3, hidden=6)


KW = dict(lr=0.2, local_rounds=3, batch_size=5, clients_per_round=3)


def test_one_component_is_fedavg_bit_for_bit(fed, model):
    em, avg = FedEM(num_components=1, **KW), FedAvg(**KW)
    a, b = em.init(fed, model, seed=SEED), avg.init(fed, model, seed=SEED)
    for _ in range(3):
        a, b = em.round(a, fed, model), avg.round(b, fed, model)
    assert torch.equal(a.tensors["mixture"], torch.ones(5, 1, dtype=torch.float64))
    assert all(torch.equal(a.models["components"][k], v) for k, v in b.models["global"].items())


def _dnn(p, x):
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"]) @ p["fc2.weight"] + p["fc2.bias"]


def _max_diff(a, b):
    return max([float((a.models[m][k] - b.models[m][k]).abs().max())
                for m in a.models for k in a.models[m]]
               + [float((a.tensors[k] - b.tensors[k]).abs().max()) for k in a.tensors])


def test_engine_equals_independent_per_client_oracle(fed, model):
    alg = FedEM(num_components=2, **KW)
    engine = oracle = alg.init(fed, model, seed=SEED)
    for _ in range(3):
        engine = alg.round(engine, fed, model)
        oracle = oracle_round(alg, oracle, fed, model)
    # float64: softmax vs normalised exp, batched vs per-client forward: ~1e-16 per op
    assert _max_diff(engine, oracle) < 1e-12
    pi = engine.tensors["mixture"]
    assert float((pi - 0.5).abs().max()) > 1e-3          # the weights moved off uniform
    torch.testing.assert_close(pi.sum(1), torch.ones(5, dtype=torch.float64))


def test_unweighted_component_training_is_caught(fed, model):
    alg = FedEM(num_components=2, **KW)
    s = alg.round(alg.init(fed, model, seed=SEED), fed, model)
    assert _max_diff(alg.round(s, fed, model), oracle_round(alg, s, fed, model,
                                                            weighted=False)) > 1e-6


def test_evaluated_predictor_is_the_mixture(fed, model):
    alg = FedEM(num_components=2, **KW)
    s = alg.round(alg.init(fed, model, seed=SEED), fed, model)
    params = alg.evaluated(s)["personalized"]
    mix = model_for(alg, model)
    assert isinstance(mix, Mixture)
    x = fed.test.x[:6].unsqueeze(0).expand(5, 6, 4)
    comps = s.models["components"]
    probs = sum(s.tensors["mixture"][:, j, None, None]
                * torch.softmax(_dnn({k: v[j] for k, v in comps.items()}, x), -1)
                for j in range(2))
    torch.testing.assert_close(mix.forward(params, x), probs.log(), rtol=0, atol=1e-12)
    acc, loss = evaluate(mix, params, fed.test)
    assert acc.shape == (5,) and bool(torch.isfinite(loss).all())


def test_participant_split_holds_exactly_the_participants_rows(fed):
    part = participant_split(fed.train, torch.tensor([1, 3]))
    assert part.counts.tolist() == [int(fed.train.counts[1]), int(fed.train.counts[3])]
    for j, i in enumerate((1, 3)):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        p = int(part.offsets[j])
        assert torch.equal(part.x[p:p + n], fed.train.x[o:o + n])
        assert torch.equal(part.y[p:p + n], fed.train.y[o:o + n])
