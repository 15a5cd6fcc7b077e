"""SAM-family oracles (verification/oracles/sam.py): each identity check HOLDS, and one
changed step in the method (monkeypatched; a ρ × 1.01 only shows where the perturbation is
active, so these also show that the checks exercise it) makes it FAIL."""

import pytest

import algorithms.methods.sam.pfedhn as pfedhn
import algorithms.methods.sam.plgu_grep as plgu_grep
import algorithms.methods.sam.plgu_lf as plgu_lf

NAMES = ["fedsam", "plgu-lf", "plgu-grep", "pfedhn", "plgu-ghn"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


def _rho(f):
    return lambda *a, rho, **k: f(*a, rho=rho * 1.01, **k)


def _server_sum(real):
    """PLGU-LF's server: w̃ + Σ_i (w̃_i − w̃) instead of the mean."""
    def server_aggregate(self, phase, state, uploads, fed, model):
        w = state.models["global"]
        n = next(iter(uploads["global"].values())).shape[0]
        up = {"global": {k: w[k] + n * (v - w[k]) for k, v in uploads["global"].items()}}
        return real(self, phase, state, up, fed, model)
    return server_aggregate


MUTATIONS = {
    "fedsam": (plgu_lf, "sam_gradient", _rho),
    "plgu-lf": (plgu_lf.PLGULF, "server_aggregate", _server_sum),
    "plgu-grep": (plgu_grep, "sam_gradient", _rho),
    "pfedhn": (pfedhn, "local_sgd",
               lambda f: lambda model, params, x, y, lr: f(model, params, x, y, lr * 1.01)),
    "plgu-ghn": (pfedhn, "perturbation", _rho),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    owner, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(owner, attr, wrap(getattr(owner, attr)))
    assert verdict(name) == "FAILS"


def test_the_plgu_lf_check_exercises_the_layerwise_perturbation(verdict, monkeypatch):
    monkeypatch.setattr(plgu_lf, "sam_gradient", _rho(plgu_lf.sam_gradient))
    assert verdict("plgu-lf") == "FAILS"
