"""A method that reads its clients' TEST split while training is exposed by its oracle
check: the oracles read only the training split (the issue's evaluation leak).  The leak is
simulated where methods read whole splits — ``ClientView.train`` (IFCA's cluster estimate,
FedEM's E-step, FedRoD's class counts, PPFE's stage transition) — by handing them the
participants' test split instead; the check must FAIL."""

import dataclasses

import pytest

import algorithms.engine.contract as contract


def _leaking_view(real):
    def engine_view(alg, state, fed, phase):
        view = real(alg, state, fed, phase)
        if view.train is None:
            return view
        whole = phase.clients.numel() == fed.num_clients
        test = fed.test if whole else contract.participant_split(
            fed.test, phase.clients.to(fed.device))
        return dataclasses.replace(view, train=test)
    return engine_view


@pytest.mark.parametrize("name", ["ifca", "fedem", "fedrod", "ppfe"])
def test_training_on_the_test_split_fails_the_oracle_check(verdict, monkeypatch, name):
    assert verdict(name) == "HOLDS"
    monkeypatch.setattr(contract, "engine_view", _leaking_view(contract.engine_view))
    assert verdict(name) == "FAILS"
