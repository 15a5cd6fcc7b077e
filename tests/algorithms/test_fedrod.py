"""FedRoD (algorithms/methods/decoupled/fedrod.py): with balanced labels its generic model is FedAvg bit for
bit (Balanced Softmax = cross-entropy under a uniform prior); an independent per-client loop
written from Chen & Chao, ICLR 2022 (eqs. 6–7, Algorithm 1: BSM with log π from the client's
labels, personalized head on z_G + z_P with φ, ψ_G fixed) gives the same models; the
generic model trained with plain cross-entropy instead is caught; the personalized model is
the sum of the heads."""

import numpy as np
import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.decoupled.fedrod import FedRoD, class_counts, log_prior_shift
from algorithms.engine.models import DNN
from synthetic.federation import Federation, Split
from verification.oracles.decoupled import fedrod_round as oracle_round

SEED = 6


@pytest.fixture(scope="module")
def skewed():
    """5 clients with skewed labels (client 2 lacks class 2: a −∞ prior entry)."""
    rng = np.random.RandomState(4)
    sizes = [20, 34, 16, 26, 22]
    centres = rng.randn(3, 4) * 2
    probs = [[.6, .3, .1], [.2, .2, .6], [.5, .5, 0], [.1, .8, .1], [.34, .33, .33]]
    ys = [rng.choice(3, n, p=p) for n, p in zip(sizes, probs)]
    xs = [centres[y] + rng.randn(len(y), 4) for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


def balanced_federation():
    """4 clients whose training labels are exactly balanced (k of each of 3 classes)."""
    rng = np.random.RandomState(5)

    def split(per_class):
        xs, ys = [], []
        for k in per_class:
            y = np.repeat(np.arange(3), k)
            rng.shuffle(y)
            xs.append(rng.randn(len(y), 4) + y[:, None])
            ys.append(y)
        counts = torch.tensor([len(y) for y in ys])
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        return Split(torch.tensor(np.concatenate(xs)), torch.tensor(np.concatenate(ys)),
                     offsets, counts)

    return Federation(split([4, 7, 5, 6]), split([2, 2, 2, 2]), 3, "balanced")


KW = dict(lr=0.1, personal_lr=0.2, local_rounds=3, batch_size=5, clients_per_round=3)


def test_balanced_labels_make_the_generic_model_fedavg_bit_for_bit():
    fed = balanced_federation()
    model = DNN(4, 3, hidden=6)
    rod = FedRoD(**KW)
    avg = FedAvg(**{k: v for k, v in KW.items() if k != "personal_lr"})
    a, b = rod.init(fed, model, seed=SEED), avg.init(fed, model, seed=SEED)
    assert torch.equal(log_prior_shift(a.tensors["class_counts"]), torch.zeros(4, 3,
                                                                               dtype=torch.float64))
    for _ in range(3):
        a, b = rod.round(a, fed, model), avg.round(b, fed, model)
    got = rod.evaluated(a)["global"]
    assert all(torch.equal(got[k], b.models["global"][k]) for k in b.models["global"])


def test_class_counts_and_prior(skewed):
    counts = class_counts(skewed.train, 3, torch.float64)
    for i in range(5):
        o, c = int(skewed.train.offsets[i]), int(skewed.train.counts[i])
        want = np.bincount(skewed.train.y[o:o + c].numpy(), minlength=3)
        assert counts[i].tolist() == want.tolist()
    shift = log_prior_shift(counts)
    assert shift[2, 2] == -float("inf") and (shift.max(1).values == 0).all()


def _max_diff(a, b):
    return max(float((a.models[m][k] - b.models[m][k]).abs().max())
               for m in a.models for k in a.models[m])


def test_engine_equals_independent_per_client_oracle(skewed):
    model = DNN(4, 3, hidden=6)
    alg = FedRoD(**KW)
    engine = oracle = alg.init(skewed, model, seed=SEED)
    for _ in range(3):
        engine = alg.round(engine, skewed, model)
        oracle = oracle_round(alg, oracle, skewed, model)
    # float64: log π shifted by a per-client constant and the head gradient through the
    # summed head are the same in exact arithmetic; measured ~1e-16
    assert _max_diff(engine, oracle) < 1e-12
    assert float(engine.models["personal_head"]["fc2.weight"].abs().max()) > 0


def test_plain_cross_entropy_for_the_generic_model_is_caught(skewed):
    model = DNN(4, 3, hidden=6)
    alg = FedRoD(**KW)
    start = alg.init(skewed, model, seed=SEED)
    assert _max_diff(alg.round(start, skewed, model),
                     oracle_round(alg, start, skewed, model, balanced=False)) > 1e-6


def test_personalized_model_is_generic_plus_personal_head(skewed):
    model = DNN(4, 3, hidden=6)
    alg = FedRoD(**KW)
    s = alg.round(alg.init(skewed, model, seed=SEED), skewed, model)
    ev = alg.evaluated(s)
    x = skewed.test.x[:7].unsqueeze(0).expand(5, 7, 4)
    h = torch.relu(x @ s.models["body"]["fc1.weight"] + s.models["body"]["fc1.bias"].unsqueeze(1))
    gh, ph = s.models["generic_head"], s.models["personal_head"]
    zg = h @ gh["fc2.weight"] + gh["fc2.bias"].unsqueeze(1)
    zp = h @ ph["fc2.weight"] + ph["fc2.bias"].unsqueeze(1)
    torch.testing.assert_close(model.forward(ev["personalized"], x), zg + zp, rtol=0, atol=1e-12)
