"""Server-optimiser oracles (verification/oracles/server_optimizers.py): each identity check
HOLDS, and one changed step of the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.averaging.server_optimizers as so
from verification.oracles.mutations import summed

NAMES = ["fedavgm", "fedadagrad", "fedyogi", "fedadam"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


def _second_moment_with(beta2_factor):
    real = so.second_moment
    return lambda rule, v, d, beta2: real(rule, v, d, min(beta2 * beta2_factor, 0.999))


def _doubled_adagrad(rule, v, d, beta2):
    # FedAdagrad's v_t = v + Δ² made v + 2Δ²
    return {k: v[k] + 2 * d[k] * d[k] for k in v}


MUTATIONS = {
    # the server mean of the client models made a sum
    "fedavgm": ("weighted_mean", summed),
    # Δ_t with the wrong sign (x_t − x̄)
    "fedadagrad": ("pseudo_gradient", lambda f: lambda mean, x: {k: -v for k, v in f(mean, x).items()}),
    # β₂ changed by 1 %
    "fedyogi": ("second_moment", lambda f: _second_moment_with(1.01)),
    "fedadam": ("second_moment", lambda f: _second_moment_with(1.01)),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(so, attr, wrap(getattr(so, attr)))
    assert verdict(name) == "FAILS"


def test_a_changed_adagrad_accumulator_fails(verdict, monkeypatch):
    monkeypatch.setattr(so, "second_moment", _doubled_adagrad)
    assert verdict("fedadagrad") == "FAILS"
