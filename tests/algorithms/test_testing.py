"""algorithms.testing: the contract battery passes a correct algorithm and each property
catches a mutation that breaks it."""

from dataclasses import dataclass

import pytest
import torch

from algorithms.engine.base import hp
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.testing import CONTRACT, check_contract, contract_battery


def test_the_battery_passes_fedavg():
    got = contract_battery(FedAvg, skip=("flower",))
    assert got == {p: "ok" for p in CONTRACT if p != "flower"}


def test_unknown_properties_are_an_error():
    with pytest.raises(ValueError, match="unknown contract propert"):
        check_contract(FedAvg, "fast")
    with pytest.raises(ValueError, match="unknown contract propert"):
        contract_battery(FedAvg, skip=("fast",))


@dataclass(frozen=True)
class NoSymbol(FedAvg):
    """FedAvg (McMahan et al., AISTATS 2017) with an undocumented extra field."""

    extra: float = hp(1.0, "an extra field")


@dataclass(frozen=True)
class RandomNoise(FedAvg):
    """Draws from torch's global generator: not reproducible from (seed, round)."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        return kept, {"global": {k: v + 1e-3 * torch.rand_like(v) for k, v in up["global"].items()}}


@dataclass(frozen=True)
class Float64Upload(FedAvg):
    """Casts its uploads to float64 whatever the data's dtype."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        return kept, {"global": {k: v.double() for k, v in up["global"].items()}}


@dataclass(frozen=True)
class NaNUpload(FedAvg):
    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        return kept, {"global": {k: v * float("nan") for k, v in up["global"].items()}}


@dataclass(frozen=True)
class NoTraining(FedAvg):
    def client_update(self, phase, model, view):
        x, _ = view.batches["sgd"]
        return {}, {"global": {k: v.expand(x.shape[1], *v.shape[1:]).clone()
                               for k, v in view.server["global"].items()}}


@dataclass(frozen=True)
class CrossClient(FedAvg):
    """A client's update reads the other clients' rows: the batched engine and the
    client-by-client loop disagree."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        return kept, {"global": {k: v + 0.1 * v[:1]
                                 for k, v in up["global"].items()}}


@dataclass(frozen=True)
class PeeksAtTest(FedAvg):
    """A plugin whose clients read their test split in client_update (an evaluation leak)."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        if view.test is None:           # the engine hands it over when every client takes part
            return kept, up
        return kept, {"global": {k: v + 1e-12 * view.test.x.mean()
                                 for k, v in up["global"].items()}}


@pytest.mark.parametrize("cls, prop, message", [
    (NoSymbol, "documented", "no paper symbol"),
    (RandomNoise, "deterministic", "states differ"),
    (PeeksAtTest, "isolation", r"PeeksAtTest reads the test split while training: .* these "
                              r"differ: round 1: model global\.fc1\.bias"),
    (Float64Upload, "dtype_device", "float32 data gave a torch.float64"),
    (NaNUpload, "finite", "NaN/inf"),
    (NoTraining, "learns", "best evaluated accuracy"),
    (CrossClient, "reference_loop", "client-by-client loop"),
])
def test_each_property_catches_its_mutation(cls, prop, message):
    with pytest.raises(AssertionError, match=message):
        check_contract(cls, prop)


def test_the_battery_stops_a_leaking_plugin_with_a_clear_message():
    with pytest.raises(AssertionError, match="reads the test split while training") as err:
        contract_battery(PeeksAtTest, skip=("flower",))
    assert "carved from the training split" in str(err.value)


def test_resume_catches_a_checkpoint_that_does_not_give_the_state_back(monkeypatch):
    from algorithms.engine import checkpoint

    load = checkpoint.load_checkpoint

    def perturbed(*args, **kwargs):
        state = load(*args, **kwargs)
        return state.replace(models={m: {k: v + 1e-9 for k, v in p.items()}
                                     for m, p in state.models.items()})

    assert check_contract(FedAvg, "resume") == "ok"
    monkeypatch.setattr(checkpoint, "load_checkpoint", perturbed)
    with pytest.raises(AssertionError, match="resumed against straight"):
        check_contract(FedAvg, "resume")


def test_flower_equality_and_its_mutation(monkeypatch):
    pytest.importorskip("flwr")
    assert check_contract(FedAvg, "flower") == "ok"
    original = FedAvg.client_update

    def skewed(self, phase, model, view):           # client 1 differs under Flower only
        kept, up = original(self, phase, model, view)
        if view.clients.numel() == 1 and int(view.clients[0]) == 1:
            up = {"global": {k: v * (1 + 1e-9) for k, v in up["global"].items()}}
        return kept, up

    monkeypatch.setattr(FedAvg, "client_update", skewed)
    with pytest.raises(AssertionError, match="Flower against the engine"):
        check_contract(FedAvg, "flower")
