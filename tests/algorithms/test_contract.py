"""Contract tests run on every registered algorithm: deterministic, keeps dtype/device,
learns a planted problem, produces no NaN, names its evaluated models."""

import dataclasses

import numpy as np
import pytest
import torch

from algorithms.base import State, hyperparameters, registry
from algorithms.evaluation import evaluate
from algorithms.models import DNN
from synthetic.federation import Federation

# Small, common settings so each round is cheap; only fields an algorithm has are set.
# Learning rates are raised from the papers' (tuned for 600-800 rounds) so that a planted
# problem is learned within 15 rounds by every algorithm.
SMALL = {"local_rounds": 10, "inner_steps": 5, "batch_size": 10, "clients_per_round": 4,
         "lr": 0.03, "personal_lr": 0.05}


def planted_federation():
    """6 IID clients, 3 well-separated Gaussian classes in 5-d (Bayes accuracy ≈ 1)."""
    rng = np.random.RandomState(0)
    means = np.array([[3.0, 0, 0, 0, 0], [0, 3.0, 0, 0, 0], [0, 0, 3.0, 0, 0]])
    xs, ys = [], []
    for _ in range(6):
        y = rng.randint(0, 3, 80)
        xs.append(means[y] + 0.5 * rng.randn(80, 5))
        ys.append(y)
    return Federation.from_client_arrays(xs, ys, num_classes=3, device="cpu",
                                         dtype=torch.float64)


def build(cls):
    names = {f.name for f in hyperparameters(cls)}
    return cls(**{k: v for k, v in SMALL.items() if k in names})


@pytest.fixture(scope="module")
def fed():
    return planted_federation()


@pytest.fixture(scope="module")
def model():
    return DNN(5, 3, hidden=8)


ALGORITHMS = sorted(registry())


def _tensors(state: State):
    for p in state.models.values():
        yield from p.values()
    yield from state.tensors.values()


@pytest.mark.parametrize("name", ALGORITHMS)
def test_deterministic_dtype_finite(name, fed, model):
    alg = build(registry()[name])
    a = b = None
    for attempt in range(2):
        s = alg.init(fed, model, seed=4)
        for _ in range(2):
            s = alg.round(s, fed, model)
        a, b = (s, b) if attempt == 0 else (a, s)
    assert a.round == 2
    for x, y in zip(_tensors(a), _tensors(b)):
        assert torch.equal(x, y), f"{name}: same seed gave different states"
        if x.is_floating_point():
            assert x.dtype == torch.float64 and x.device == fed.device
            assert bool(torch.isfinite(x).all())


@pytest.mark.parametrize("name", ALGORITHMS)
def test_learns_planted_problem(name, fed, model):
    alg = build(registry()[name])
    s = alg.init(fed, model, seed=0)
    for _ in range(15):
        s = alg.round(s, fed, model)
    evaluated = alg.evaluated(s)
    assert evaluated, f"{name} evaluates no model"
    best = 0.0
    for label, params in evaluated.items():
        assert isinstance(label, str) and label
        acc, _ = evaluate(model, params, fed.test)
        best = max(best, float(acc.mean()))
    # chance is 1/3; a learning algorithm clears 0.7 on separated blobs within 15 rounds
    assert best >= 0.7, f"{name}: best evaluated accuracy {best:.3f}"


@pytest.mark.parametrize("name", ALGORITHMS)
def test_hyperparameters_are_documented_and_frozen(name):
    cls = registry()[name]
    for f in hyperparameters(cls):
        assert f.metadata.get("help"), f"{name}.{f.name} has no help text"
    alg = build(cls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(alg, hyperparameters(cls)[0].name, 1)
