"""FedAMP (algorithms/methods/clustered/fedamp.py): a per-client oracle written from the paper (plain loops
over clients and pairs, float64, the engine's mini-batch indices) for both attention
rules, the mutation it catches, the reduction HeurFedAMP ξ_ii = 1, λ = 0 = local training
bit for bit, and the refused α/σ."""


import pytest
import torch

import algorithms.methods.clustered.fedamp as fedamp
from algorithms.methods.clustered.fedamp import FedAMP
from algorithms.engine.models import DNN
from algorithms.engine.steps import local_sgd
from verification.oracles.clustered_soft import fedamp_oracle as oracle

C = 4
# float64: sums over 6 clients and a few hundred parameters in another order
ATOL = 1e-12


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedAMP(**{"lam": 1.0, "alpha": 0.2, "sigma": 2.0, "lr": 0.1, "local_rounds": 3,
                     "batch_size": 5, "clients_per_round": 3, **kw})


def _engine(alg, fed, model, seed, rounds):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _diff(state, bank):
    return max(float((state.models[m][k][i] - b[k]).abs().max())
               for m in ("personalized", "bank") for i, b in enumerate(bank) for k in b)


@pytest.mark.parametrize("attention", ["fedamp", "heuristic"])
def test_engine_equals_the_per_client_oracle(fed, model, attention):
    alg = _alg(attention=attention, **({"sigma": 3.0} if attention == "heuristic" else {}))
    ref = oracle(alg, fed, model, seed=1, rounds=3)
    assert _diff(_engine(alg, fed, model, seed=1, rounds=3), ref) <= ATOL


def test_the_oracle_comparison_sees_inverted_attention(fed, model, monkeypatch):
    # the mutation: ξ_ij = (α/σ) exp(+‖w_i − w_j‖²/σ) (distant models attract more)
    alg = _alg()
    ref = oracle(alg, fed, model, seed=1, rounds=3)
    monkeypatch.setattr(fedamp, "attention_weights", _inverted)
    mutated = _engine(alg, fed, model, seed=1, rounds=3)
    assert _diff(mutated, ref) > 1e-6
    assert _diff(mutated, oracle(alg, fed, model, seed=1, rounds=3, sign=-1.0)) <= ATOL


def _inverted(flat, chosen, rule, *, alpha, sigma, self_weight):
    mine = flat[chosen]
    d2 = ((mine[:, None, :] - flat[None, :, :]) ** 2).sum(-1)
    xi = alpha / sigma * torch.exp(d2 / sigma)
    own = torch.zeros_like(xi, dtype=torch.bool)
    own[torch.arange(chosen.numel()), chosen] = True
    xi = xi.masked_fill(own, 0.0)
    return xi + own * (1 - xi.sum(1, keepdim=True))


def test_full_self_attention_without_penalty_is_local_training(fed, model):
    """HeurFedAMP with ξ_ii = 1 and λ = 0: u_i = w_i exactly, so every participant runs
    plain local SGD from its own model — bit for bit."""
    alg = _alg(attention="heuristic", self_weight=1.0, lam=0.0)
    state = alg.round(alg.init(fed, model, seed=0), fed, model)     # models now differ
    phase = alg.first_phase(state, fed, model)
    x, y = fed.train.gather(phase.batches["sgd"])
    own = {k: v[phase.clients] for k, v in state.models["personalized"].items()}
    want = local_sgd(model, own, x, y, alg.lr)
    got = alg.round(state, fed, model).models["personalized"]
    for k in want:
        assert torch.equal(got[k][phase.clients], want[k])


def test_self_weights_that_would_be_negative_are_refused(fed, model):
    with pytest.raises(ValueError, match="negative"):
        FedAMP(alpha=1.0, sigma=1.0, clients_per_round=3).init(fed, model, seed=0)  # 5 > 1
    FedAMP(alpha=1.0, sigma=1.0, attention="heuristic", clients_per_round=3).init(fed, model, 0)
