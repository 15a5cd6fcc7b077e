"""FedFomo (algorithms/methods/clustered/fedfomo.py): a per-client oracle written from the paper (plain loops
over clients and candidate models, float64, the engine's mini-batch indices), the mutation
it catches, the first-round reduction to local SGD (bit for bit), the train/validation
split and its mini-batches."""


import pytest
import torch

import algorithms.methods.clustered.fedfomo as fedfomo
from algorithms.methods.clustered.fedfomo import FedFomo, first_order_weights, split_sizes
from algorithms.engine.models import DNN
from algorithms.engine.steps import local_sgd
from verification.oracles.clustered_soft import fedfomo_oracle as oracle

C = 4
# float64: sums over 6 clients and a few hundred parameters in another order
ATOL = 1e-12


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedFomo(**{"lr": 0.1, "local_rounds": 3, "batch_size": 5, "clients_per_round": 3,
                      "val_fraction": 0.25, **kw})


def _engine(alg, fed, model, seed, rounds):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _diff(state, bank):
    return max(float((state.models[m][k][i] - b[k]).abs().max())
               for m in ("personalized", "bank") for i, b in enumerate(bank) for k in b)


def test_engine_equals_the_per_client_oracle(fed, model):
    alg = _alg()
    ref, positive_seen = oracle(alg, fed, model, seed=0, rounds=4)
    assert positive_seen            # some client did take a step toward another's model
    assert _diff(_engine(alg, fed, model, seed=0, rounds=4), ref) <= ATOL


def test_the_oracle_comparison_sees_unclipped_gains(fed, model, monkeypatch):
    # the mutation: negative first-order gains kept (no max(0, ·))
    alg = _alg()
    ref, _ = oracle(alg, fed, model, seed=0, rounds=4)

    def unclipped(own_loss, losses, dist, self_mask):
        gain = own_loss[:, None] - losses
        w = torch.where((dist > 0) & ~self_mask, gain / dist.clamp(min=1e-300),
                        torch.zeros_like(gain))
        total = w.sum(1, keepdim=True)
        return torch.where(total != 0, w / torch.where(total != 0, total, 1.0), w)

    monkeypatch.setattr(fedfomo, "first_order_weights", unclipped)
    mutated = _engine(alg, fed, model, seed=0, rounds=4)
    assert _diff(mutated, ref) > 1e-6
    # unclipped gains can nearly cancel in the normalising sum, amplifying rounding: 1e-9
    assert _diff(mutated, oracle(alg, fed, model, seed=0, rounds=4, clip=False)[0]) <= 1e-9


def test_first_round_is_local_sgd_on_the_training_part(fed, model):
    """All models equal in round 0: no positive gain, θ_i unchanged, then local SGD —
    bit for bit."""
    alg = _alg()
    state = alg.init(fed, model, seed=0)
    phase = alg.first_phase(state, fed, model)
    x, y = fed.train.gather(phase.batches["sgd"])
    own = {k: v[phase.clients] for k, v in state.models["personalized"].items()}
    want = local_sgd(model, own, x, y, alg.lr)
    got = alg.round(state, fed, model).models["personalized"]
    for k in want:
        assert torch.equal(got[k][phase.clients], want[k])


def test_weights_rule():
    own = torch.tensor([1.0, 1.0], dtype=torch.float64)
    losses = torch.tensor([[1.0, 0.5, 2.0], [0.0, 1.0, 0.8]], dtype=torch.float64)
    dist = torch.tensor([[0.0, 1.0, 1.0], [2.0, 0.0, 0.1]], dtype=torch.float64)
    me = torch.tensor([[True, False, False], [False, True, False]])
    w = first_order_weights(own, losses, dist, me)
    # row 0: gains (·, 0.5, −1 → 0) → (0, 1, 0); row 1: (0.5, ·, 2.0) → (0.2, 0, 0.8)
    torch.testing.assert_close(w, torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.0, 0.8]],
                                               dtype=torch.float64), rtol=0, atol=1e-15)


def test_split_sizes():
    counts = torch.tensor([1, 2, 5, 10])
    fit, val = split_sizes(counts, 0.25)
    assert val.tolist() == [0, 1, 2, 3] and (fit + val).tolist() == counts.tolist()
    with pytest.raises(ValueError):
        FedFomo(val_fraction=1.0)
