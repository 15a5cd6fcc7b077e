"""engine.train_test_isolation: it holds for every registered algorithm, FAILS naming a
registered algorithm that reads the test split in client_update, and breaks (ERROR) when it
could not see a test read (its positive control not flagged)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

import algorithms.isolation
from algorithms.engine import base
from algorithms.engine.base import hp
import torch
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
        if view.test is None:  # handed only when every client takes part
            return kept, up
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
    assert "reading the test split: peeks-at-test: S = N: round 1: model global" in result.detail


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
    assert "perfedavg: S = N: round 1: model personalized" in result.detail


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


# ---- every phase (issue 41): late reads and a selection by test loss ---------------------

@dataclass(frozen=True)
class ReadsFromRound(FedAvg):
    """FedAvg whose clients shift their upload by their test features' mean from round
    ``start`` on (the test split reaches client_update when every client takes part)."""

    start: int = hp(2, "first round that reads the test split", symbol="—")

    def client_update(self, phase, model, view):
        kept, up = super().client_update(phase, model, view)
        if view.round < self.start or view.test is None:
            return kept, up
        m = view.test.x.mean()
        return kept, {"global": {k: v + 1e-12 * m for k, v in up["global"].items()}}


@dataclass(frozen=True)
class SelectsByTestLoss(FedAvg):
    """FedAvg whose server picks the S clients with the largest test loss of the global
    model (instead of S at random): nothing changes while every client takes part."""

    def first_phase(self, state, fed, model):
        from algorithms.engine.base import broadcast
        from algorithms.engine.contract import Phase

        batches = fed.sample_batches(self.local_rounds, self.batch_size, state.generator())
        params = broadcast(state.models["global"], 1)
        losses = []
        for i in range(fed.num_clients):
            s, n = int(fed.test.offsets[i]), int(fed.test.counts[i])
            x, y = fed.test.x[s:s + n][None], fed.test.y[s:s + n][None]
            losses.append(float(model.per_client_loss(params, x, y)[0]))
        chosen = torch.tensor(sorted(sorted(range(fed.num_clients), key=lambda i: -losses[i])
                                     [:self.clients_per_round]))
        return Phase("train", chosen, {"sgd": batches}, {})


@pytest.mark.parametrize("cls,where", [
    (ReadsFromRound, "S = N: round 3: model global"),              # reads from round index 2
    (lambda **k: ReadsFromRound(start=5, **k), "S = N: round 6: model global"),
    (SelectsByTestLoss, "S = N/2: round 1: model global")])
def test_late_reads_and_a_selection_by_test_loss_fail(monkeypatch, cls, where):
    made = cls if isinstance(cls, type) else type("ReadsFromRound5", (ReadsFromRound,), {})
    if not isinstance(cls, type):
        made = dataclass(frozen=True)(type("ReadsFromRound5", (ReadsFromRound,),
                                           {"__annotations__": {"start": int}, "start": 5}))
    monkeypatch.setitem(base._REGISTRY, "planted-leak", made)
    result = _run()
    assert result.verdict is Verdict.FAILS, result.detail
    assert list(result.extra["differing"]) == ["planted-leak"]
    diffs = result.extra["differing"]["planted-leak"]
    assert diffs[0].startswith(where), diffs
    if made is not SelectsByTestLoss:   # located to its round by the one-round replacement
        first = made().start
        assert any(d.startswith(f"S = N: test replaced in round {first} only") for d in diffs)
        assert not any(f"test replaced in round {first - 1} only" in d for d in diffs)
    else:                                # every client taking part hides it
        assert all(d.startswith("S = N/2") for d in diffs)


def test_phase_rounds_are_declared_and_the_check_runs_past_them():
    from algorithms.isolation import isolation_rounds, phase_rounds
    from algorithms.engine.models import DNN

    model = DNN(5, 3, hidden=4)
    reg = base.registry()
    ppfe = engine_isolation.configured(reg["ppfe"], stages=3, stage_fractions="1,1,5",
                                       total_rounds=7)
    starts = tuple(itertools.accumulate(ppfe.schedule(model)))  # each stage's first round
    assert phase_rounds(ppfe, model) == starts and starts[-1] == 7
    assert isolation_rounds(ppfe, model) == 9          # one full round past the last stage
    cfl = engine_isolation.configured(reg["cfl"], split_after=9)
    assert phase_rounds(cfl, model) == (9,) and isolation_rounds(cfl, model) == 11
    assert phase_rounds(FedAvg(), model) == (0,) and isolation_rounds(FedAvg(), model) == 6
