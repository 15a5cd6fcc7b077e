"""kNN-Per (algorithms/methods/averaging/knnper.py): the reduction λ = 0 = FedAvg (training bit for bit,
evaluation equal), a per-client, per-sample oracle of the personalized predictor written
from the paper (plain loops, float64), the mutation it catches, the datastore rows."""

import pytest
import torch

import algorithms.methods.averaging.knnper as knnper
from algorithms.engine.evaluation import evaluate
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.averaging.knnper import KNNPer, datastore_rows
from algorithms.engine.models import DNN, MLR
from verification.oracles.averaging import knnper_predictions

C = 4
KW = {"lr": 0.1, "local_rounds": 3, "batch_size": 5, "clients_per_round": 3}


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _run(alg, fed, model, rounds, seed=0):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def test_lambda0_is_fedavg(fed, model):
    a = _run(KNNPer(lam=0.0, **KW), fed, model, 3)
    b = _run(FedAvg(**KW), fed, model, 3)
    for k, v in b.models["global"].items():
        assert torch.equal(a.models["global"][k], v)
    ev = KNNPer(lam=0.0, **KW).evaluated(a)
    acc_p, loss_p = evaluate(model, ev["personalized"], fed.test)
    acc_g, loss_g = evaluate(model, b.models["global"], fed.test)
    assert torch.equal(acc_p, acc_g)
    # log(softmax(f)) vs f's own cross-entropy: float64 rounding only
    torch.testing.assert_close(loss_p, loss_g, rtol=0, atol=1e-12)
    # the global model is FedAvg's for every λ (only inference differs)
    c = _run(KNNPer(lam=0.7, **KW), fed, model, 3)
    assert torch.equal(c.models["global"]["fc1.weight"], b.models["global"]["fc1.weight"])


def oracle(alg, fed, model, state):
    return knnper_predictions(alg, fed, state.models["global"], C)


@pytest.mark.parametrize("lam,k", [(0.5, 10), (1.0, 3), (0.3, 1000)])
def test_personalized_predictor_equals_the_per_sample_oracle(fed, lam, k):
    """On MLR (features = inputs: continuous, no tied distances; the DNN's dead ReLUs map
    many rows to one feature vector, and tied neighbours may be taken in any order)."""
    model = MLR(6, C)
    alg = KNNPer(lam=lam, neighbours=k, **KW)
    state = _run(alg, fed, model, 2)
    acc, loss = evaluate(model, alg.evaluated(state)["personalized"], fed.test)
    want_acc, want_loss = oracle(alg, fed, model, state)
    assert torch.equal(acc.double(), want_acc)
    # float64: cdist and softmax vs direct sums of a few dozen terms
    torch.testing.assert_close(loss, want_loss, rtol=0, atol=1e-12)
    # personalization helps on these permuted-label clients (chance 1/3)
    if lam == 1.0:
        g_acc, _ = evaluate(model, state.models["global"], fed.test)
        assert float(acc.mean()) > float(g_acc.mean())


def test_the_oracle_comparison_sees_a_wrong_kernel(fed, monkeypatch):
    # the mutation: one neighbour fewer
    model = MLR(6, C)
    alg = KNNPer(lam=0.8, neighbours=5, **KW)
    state = _run(alg, fed, model, 2)
    want = oracle(alg, fed, model, state)
    original = knnper.knn_probabilities
    monkeypatch.setattr(knnper, "knn_probabilities",
                        lambda z, s, l, c, k, *a: original(z, s, l, c, k - 1, *a))
    _, loss = evaluate(model, alg.evaluated(state)["personalized"], fed.test)
    assert float((loss - want[1]).abs().max()) > 1e-6


def test_datastore_rows_keep_everything_or_evenly_spaced_rows(fed):
    clients = torch.arange(fed.num_clients)
    batches, payload = datastore_rows(fed, clients, capacity=1000)
    assert torch.equal(payload["rows"], fed.train.counts)
    idx = batches["rows"][0]
    for i in range(fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        assert idx[i, :n].tolist() == list(range(o, o + n))
    batches, payload = datastore_rows(fed, clients, capacity=4)
    assert payload["rows"].tolist() == [4] * fed.num_clients
    for i in range(fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        assert batches["rows"][0, i].tolist() == [o + (j * n) // 4 for j in range(4)]


def test_datastore_holds_the_global_models_features(fed, model):
    from algorithms.engine.features import features
    alg = KNNPer(**KW)
    state = _run(alg, fed, model, 1)
    w = state.models["global"]
    for i in range(fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        want = features(model, w, fed.train.x[o:o + n][None])[0]
        assert int(state.tensors["store_n"][i]) == n
        torch.testing.assert_close(state.tensors["store_z"][i, :n], want, rtol=0, atol=1e-14)
        assert torch.equal(state.tensors["store_y"][i, :n], fed.train.y[o:o + n])


def test_lambda_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        KNNPer(lam=1.5)
