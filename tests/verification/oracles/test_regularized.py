"""Regularized-family oracles (verification/oracles/regularized.py, and the oracle-form
checks of pFedMe and Per-FedAvg): each identity check HOLDS, and one changed step in the
method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.regularized.apfl as apfl
import algorithms.methods.regularized.ditto as ditto
import algorithms.methods.regularized.l2sgd as l2sgd
import algorithms.methods.regularized.perfedavg as perfedavg
import algorithms.methods.regularized.pfedme as pfedme
from verification.oracles.mutations import summed

CHECKS = {"ditto": "ditto.engine_equals_oracle", "apfl": "apfl.engine_equals_oracle",
          "l2sgd": "l2sgd.engine_equals_oracle",
          "pfedme": "pfedme.engine_equals_oracle_form",
          "perfedavg": "perfedavg.engine_equals_oracle_form",
          # per-client oracles on mini-batches (HF variant and adaptation for Per-FedAvg)
          "pfedme-minibatch": "pfedme.engine_equals_oracle",
          "perfedavg-hf": "perfedavg.engine_equals_oracle",
          "perfedavg-adapt": "perfedavg.engine_equals_oracle"}


@pytest.mark.parametrize("name", CHECKS)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name, CHECKS[name]) == "HOLDS"


def _apfl_mix_sign(real):
    """v̄ = α v − (1 − α) w: a sign."""
    return lambda alpha, v, w: real(alpha, v, {k: -t for k, t in w.items()})


def _l2sgd_sum(real):
    """x̄ = Σ_i x_i instead of the mean (the server update of the averaging step)."""
    def server_aggregate(self, phase, state, uploads, fed, model):
        n = next(iter(uploads["personalized"].values())).shape[0]
        up = {"personalized": {k: v * n for k, v in uploads["personalized"].items()}}
        return real(self, phase, state, up, fed, model)
    return server_aggregate


def _lr(real, factor=1.01):
    def meta_step(self, model, w, *batches):
        out = real(self, model, w, *batches)
        return {k: w[k] + factor * (out[k] - w[k]) for k in w}
    return meta_step


MUTATIONS = {
    "ditto": (ditto, "prox_steps", lambda f: lambda *a, lam, **k: f(*a, lam=lam * 1.01, **k)),
    "apfl": (apfl, "mix", _apfl_mix_sign),
    "l2sgd": (l2sgd.L2SGD, "server_aggregate", _l2sgd_sum),
    "pfedme": (pfedme, "prox_steps", lambda f: lambda *a, lam, **k: f(*a, lam=lam * 1.01, **k)),
    "perfedavg": (perfedavg.PerFedAvg, "meta_step", _lr),
    "pfedme-minibatch": (pfedme, "prox_steps",
                         lambda f: lambda *a, lam, **k: f(*a, lam=lam * 1.01, **k)),
    "perfedavg-hf": (perfedavg.PerFedAvg, "meta_step", _lr),
    "perfedavg-adapt": (perfedavg.PerFedAvg, "adapt",
                        lambda f: lambda self, model, w, x, y: f(self, model, w, x * 1.01, y)),
}


@pytest.mark.parametrize("name", CHECKS)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    owner, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(owner, attr, wrap(getattr(owner, attr)))
    assert verdict(name, CHECKS[name]) == "FAILS"
