"""engine.train_test_isolation: it holds for every registered algorithm, FAILS naming a
registered algorithm that reads the test split in client_update, and breaks (ERROR) when it
could not see a test read (its positive control not flagged)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import algorithms.isolation
from algorithms.engine import base
from algorithms.engine.base import hp
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.perfedavg import PerFedAvg
from verification.checks import engine_isolation
from verification.core.registry import Verdict, load_all, run_check


def _run():
    return run_check(load_all()["engine.train_test_isolation"], size="quick", seed=0)


@dataclass(frozen=True)
class PeeksAtTest(FedAvg):
    """FedAvg whose clients shift their upload by their test features' mean."""

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        m = view.test.x.mean()
        return kept, {"global": {k: v + 1e-12 * m for k, v in up["global"].items()}}


def test_every_registered_algorithm_is_isolated():
    result = _run()
    assert result.verdict is Verdict.HOLDS, result.detail
    assert result.extra["algorithms"] == len(base.registry()) >= 34
    assert result.extra["control_differences"]           # the control was seen


def test_a_registered_algorithm_reading_the_test_split_fails(monkeypatch):
    monkeypatch.setitem(base._REGISTRY, "peeks-at-test", PeeksAtTest)
    result = _run()
    assert result.verdict is Verdict.FAILS
    assert result.measured == 1 and list(result.extra["differing"]) == ["peeks-at-test"]
    assert "reading the test split: peeks-at-test: round 1: model global" in result.detail


@dataclass(frozen=True)
class PerFedAvgAdaptingOnTest(PerFedAvg):
    """The mutant that flips Per-FedAvg's default to the public code's evaluation."""

    adapt_on: str = hp("test", "adapt the evaluated model on test mini-batches", symbol="—")


def test_per_fedavg_adapting_on_test_by_default_fails(monkeypatch):
    # a source mutant flipping one default: the evaluated model adapts on test mini-batches,
    # an evaluation leak that raises every reported Per-FedAvg accuracy
    monkeypatch.setitem(base._REGISTRY, "perfedavg", PerFedAvgAdaptingOnTest)
    result = _run()
    assert result.verdict is Verdict.FAILS and list(result.extra["differing"]) == ["perfedavg"]
    assert "perfedavg: round 1: model personalized" in result.detail


def test_a_blind_check_is_an_error(monkeypatch):
    # the replaced test split left as it was: nothing could ever differ
    monkeypatch.setattr(engine_isolation, "isolation_differences",
                        lambda *a, **k: [])
    result = _run()
    assert result.verdict is Verdict.ERROR and "positive control" in result.detail


@pytest.mark.parametrize("mutation", ["test split kept", "states not compared"])
def test_mutations_of_the_property_make_it_blind(monkeypatch, mutation):
    if mutation == "test split kept":
        monkeypatch.setattr(algorithms.isolation, "with_test_replaced", lambda fed, seed=0: fed)
    else:
        monkeypatch.setattr(algorithms.isolation, "state_differences", lambda a, b: [])
        monkeypatch.setattr(algorithms.isolation, "history_differences", lambda a, b: [])
    assert _run().verdict is Verdict.ERROR
