"""FedProto (algorithms/methods/prototypes/fedproto.py): a per-client oracle written from the paper (plain
loops, float64, the engine's mini-batch indices), the mutation it catches, and the
reductions λ = 0 / MLR = local training of the participants, bit for bit."""

import pytest
import torch

import algorithms.methods.prototypes.fedproto as fedproto
from algorithms.methods.prototypes.fedproto import FedProto
from algorithms.engine.models import DNN, MLR
from algorithms.engine.steps import local_sgd
from verification.oracles.prototypes import fedproto_oracle as oracle

C = 4
# float64, a few hundred ops in another order (batched vs one client): rounding only
ATOL = 1e-12


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedProto(**{"lam": 1.0, "lr": 0.1, "local_rounds": 4, "batch_size": 5,
                       "clients_per_round": 3, **kw})


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
