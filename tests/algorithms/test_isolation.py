"""algorithms.isolation: the replaced test split differs only where it should, every
registered algorithm keeps train and test apart, and a read of the test split anywhere —
a client step, a server step, ``init``, a training-side diagnostic — is found."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from algorithms.engine.base import registry
from algorithms.engine.models import DNN
from algorithms.isolation import (every_client, history_differences, is_test_side,
                                  isolation_differences, state_differences,
                                  with_test_replaced)
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.perfedavg import PerFedAvg
from algorithms.testing import build, planted_federation
from verification.checks.engine_isolation import configured


@pytest.fixture(scope="module")
def fed():
    return planted_federation(clients=4, samples=24)


@pytest.fixture(scope="module")
def model():
    return DNN(5, 3, hidden=4)


def test_only_the_test_split_is_replaced(fed):
    other = with_test_replaced(fed, seed=0)
    assert other.train is fed.train
    assert torch.equal(other.test.counts, fed.test.counts)
    assert torch.equal(other.test.offsets, fed.test.offsets)
    assert other.test.x.dtype == fed.test.x.dtype and other.test.x.shape == fed.test.x.shape
    assert not torch.isclose(other.test.x, fed.test.x).any()        # every feature is noise
    assert (other.test.y != fed.test.y).float().mean() > 0.3         # 3 classes: ~2/3 moved
    assert torch.equal(other.test.y.sort().values, fed.test.y.sort().values)  # a permutation


def test_constant_labels_are_shifted_not_kept(fed):
    from synthetic.federation import Federation, Split

    t = fed.test
    same = Federation(fed.train, Split(t.x, torch.zeros_like(t.y), t.offsets, t.counts),
                      fed.num_classes)
    assert (with_test_replaced(same).test.y == 1).all()


@pytest.mark.parametrize("key,test_side", [
    ("personalized_accuracy", True), ("global_accuracy_low5", True),
    ("local_client_accuracy", True), ("ensemble_loss", True), ("global_loss", True),
    ("wall_seconds", True), ("global_train_loss", False), ("round", False),
    ("mean_beta", False), ("stage_weighted_error", False)])
def test_test_side_keys(key, test_side):
    assert is_test_side(key) is test_side


def test_every_client_takes_part(fed):
    assert every_client(FedAvg(clients_per_round=2), fed.num_clients).clients_per_round == 4


def test_state_and_history_differences_name_the_entry(fed, model):
    a = FedAvg(clients_per_round=2).init(fed, model, 0)
    bias = a.models["global"]["fc1.bias"]
    one_ulp = torch.nextafter(bias, torch.full_like(bias, float("inf")))   # the least change
    b = a.replace(models={"global": {**a.models["global"], "fc1.bias": one_ulp}})
    assert state_differences(a, a) == []
    assert state_differences(a, b) == ["model global.fc1.bias"]
    h = [{"round": 1, "global_train_loss": 0.5, "global_accuracy": 0.9}]
    assert history_differences(h, [{**h[0], "global_accuracy": 0.1}]) == []
    assert history_differences(h, [{**h[0], "global_train_loss": 0.5 + 1e-16}]) == \
        ["round 1: history 'global_train_loss'"]
    nan = [{"round": 1, "mean_beta": float("nan")}]
    assert history_differences(nan, [dict(nan[0])]) == []


@pytest.mark.parametrize("name", sorted(registry()))
def test_every_registered_algorithm_keeps_train_and_test_apart(name, fed, model):
    assert isolation_differences(configured(registry()[name]), fed, model, rounds=2) == []


# ---- leaks in each place an algorithm could read the test split -------------------------

@dataclass(frozen=True)
class ClientLeak(FedAvg):
    """Adds a multiple of its clients' test-feature mean to the upload."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        m = view.test.x.mean()
        return kept, {"global": {k: v + 1e-12 * m for k, v in up["global"].items()}}


@dataclass(frozen=True)
class ServerLeak(FedAvg):
    """Scales the server model by client 0's test-label sum (a permutation of all test
    labels keeps the total, not a client's)."""

    def server_aggregate(self, phase, state, uploads, fed, model):
        state, nxt = super().server_aggregate(phase, state, uploads, fed, model)
        w = float(fed.test.y[:int(fed.test.counts[0])].sum())
        return state.replace(models={"global": {k: v * (1 + 1e-9 * w) for k, v in
                                                state.models["global"].items()}}), nxt


@dataclass(frozen=True)
class InitLeak(FedAvg):
    """Starts from a model shifted by the test features' mean."""

    def init(self, fed, model, seed):
        s = super().init(fed, model, seed)
        m = fed.test.x.mean()
        return s.replace(models={"global": {k: v + m for k, v in s.models["global"].items()}})


@dataclass(frozen=True)
class DiagnosticLeak(FedAvg):
    """A training-side-named diagnostic computed from client 0's test labels."""

    def diagnostics(self, state, fed, model):
        return {"label_balance": float(fed.test.y[:int(fed.test.counts[0])].double().mean())}


@pytest.mark.parametrize("cls,where", [
    (ClientLeak, "round 1: model global"), (ServerLeak, "round 1: model global"),
    (InitLeak, "init: model global"), (DiagnosticLeak, "round 1: history 'label_balance'")])
def test_a_test_read_is_found_where_it_happens(cls, where, fed, model):
    diff = isolation_differences(build(cls), fed, model, rounds=2)
    assert diff and diff[0].startswith(where), diff


def test_per_fedavg_adapting_on_test_batches_is_found(fed, model):
    # the public pFedMe code's evaluation (not the paper's method, off by default)
    assert isolation_differences(configured(PerFedAvg, adapt_on="test"), fed, model)
    assert not isolation_differences(configured(PerFedAvg), fed, model)


# ---- the documented held-out selectors validate on parts of the training split ----------

def test_cgpfl_validation_of_k_never_reads_the_test_split(fed, model):
    from algorithms.methods.clustered.cgpfl_validation import validation_select_k

    hp = dict(lam=12.0, personal_lr=0.05, inner_steps=2, lr=0.02, local_rounds=2,
              batch_size=4)
    a, b = (validation_select_k(f, model, hp, k_max=2, warmup_rounds=1, rounds=1, seed=1)
            for f in (fed, with_test_replaced(fed)))
    assert np.array_equal(a.correct, b.correct) and np.array_equal(a.loss, b.loss)


def test_ppfe_stage_validation_never_reads_the_test_split(fed, model):
    from algorithms.methods.ppfe.ppfe_stage_validation import stage_validation

    alg = configured(registry()["ppfe"], clients_per_round=2)
    a, b = (stage_validation(alg, f, model, folds=3, cv=1, seed=1)
            for f in (fed, with_test_replaced(fed)))
    assert np.array_equal(a.loss_curve, b.loss_curve)
    assert np.array_equal(a.accuracy_curve, b.accuracy_curve)
