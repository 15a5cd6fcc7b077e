"""FedProto (algorithms/methods/prototypes/fedproto.py): a per-client oracle written from the paper (plain
loops, float64, the engine's mini-batch indices), the mutation it catches, and the
reductions λ = 0 / MLR = local training of the participants, bit for bit."""

import pytest
import torch
import torch.nn.functional as F

import algorithms.methods.prototypes.fedproto as fedproto
from algorithms.methods.prototypes.fedproto import FedProto
from algorithms.engine.models import DNN, MLR
from algorithms.engine.steps import local_sgd

C = 4
# float64, a few hundred ops in another order (batched vs one client): rounding only
ATOL = 1e-12


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedProto(**{"lam": 1.0, "lr": 0.1, "local_rounds": 4, "batch_size": 5,
                       "clients_per_round": 3, **kw})


def o_features(p, x):
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"])


def oracle(alg, fed, model, seed, rounds, sign=1.0):
    """Client models and global prototypes after ``rounds`` rounds, one client at a time.
    ``sign = -1``: the mutation (the regulariser pushes features away)."""
    n = fed.num_clients
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    models = [{k: v[0].clone() for k, v in w0.items()} for _ in range(n)]
    d = w0["fc2.weight"].shape[1]
    protos = torch.zeros(C, d, dtype=torch.float64)
    known = [False] * C
    state = alg.init(fed, model, seed)
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        counts, sums = torch.zeros(C, dtype=torch.float64), torch.zeros(C, d, dtype=torch.float64)
        for j, i in enumerate(phase.clients.tolist()):
            p = models[i]
            for r in range(alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                x, y = fed.train.x[idx], fed.train.y[idx]
                leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
                z = o_features(leaves, x)
                loss = F.cross_entropy(z @ leaves["fc2.weight"] + leaves["fc2.bias"], y)
                if any(known):
                    reg = 0.0
                    for b in range(len(y)):
                        if known[int(y[b])]:
                            reg = reg + ((z[b] - protos[y[b]]) ** 2).sum()
                    loss = loss + sign * alg.lam * reg / (len(y) * d)
                grads = torch.autograd.grad(loss, list(leaves.values()))
                p = {k: v - alg.lr * g for (k, v), g in zip(p.items(), grads)}
            models[i] = p
            o, m = int(fed.train.offsets[i]), int(fed.train.counts[i])
            z = o_features(p, fed.train.x[o:o + m])
            for s in range(m):                               # eq. 5, summed; eq. 6 below
                counts[fed.train.y[o + s]] += 1
                sums[fed.train.y[o + s]] += z[s]
        for c in range(C):
            if counts[c] > 0:
                protos[c] = sums[c] / counts[c]
                known[c] = True
    return models, protos, known


def _engine(alg, fed, model, seed, rounds):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _diff(state, ref):
    models, protos, known = ref
    d = [float((state.models["personalized"][k][i] - m[k]).abs().max())
         for i, m in enumerate(models) for k in m]
    d.append(float((state.models["protos"]["protos"][0] - protos).abs().max()))
    d.append(float((state.models["protos"]["known"][0] - torch.tensor(known).double()).abs().max()))
    return max(d)


def test_engine_equals_the_per_client_oracle(fed, model):
    alg = _alg()
    ref = oracle(alg, fed, model, seed=2, rounds=3)
    assert any(ref[2])                     # rounds 2–3 ran with the regulariser on
    assert _diff(_engine(alg, fed, model, seed=2, rounds=3), ref) <= ATOL


def test_the_oracle_comparison_sees_a_flipped_regulariser(fed, model, monkeypatch):
    alg = _alg()
    ref = oracle(alg, fed, model, seed=2, rounds=3)
    original = fedproto.prototype_penalty
    monkeypatch.setattr(fedproto, "prototype_penalty",
                        lambda p, k, lam: original(p, k, -lam))
    mutated = _engine(alg, fed, model, seed=2, rounds=3)
    assert _diff(mutated, ref) > 1e-6
    assert _diff(mutated, oracle(alg, fed, model, seed=2, rounds=3, sign=-1.0)) <= ATOL


@pytest.mark.parametrize("case", ["lam0", "mlr"])
def test_reduces_to_local_training_of_the_participants(fed, model, case):
    """λ = 0, or MLR (z = x: the regulariser has no parameter to act on): every
    participant's model is local SGD from its own model on its own mini-batches, bit for
    bit; the others are untouched."""
    net = MLR(6, C) if case == "mlr" else model
    alg = _alg(lam=0.0 if case == "lam0" else 1.0)
    state = alg.round(alg.init(fed, net, seed=1), fed, net)      # prototypes now known
    phase = alg.first_phase(state, fed, net)
    x, y = fed.train.gather(phase.batches["sgd"])
    own = {k: v[phase.clients] for k, v in state.models["personalized"].items()}
    want = local_sgd(net, own, x, y, alg.lr)
    got = alg.round(state, fed, net).models["personalized"]
    others = [i for i in range(fed.num_clients) if i not in phase.clients.tolist()]
    for k in want:
        assert torch.equal(got[k][phase.clients], want[k])
        assert torch.equal(got[k][others], state.models["personalized"][k][others])
    # ... and with λ > 0 on the DNN the regulariser does change the models
    if case == "lam0":
        reg = _alg().round(state, fed, net).models["personalized"]
        assert not torch.equal(reg["fc1.weight"][phase.clients], want["fc1.weight"])
