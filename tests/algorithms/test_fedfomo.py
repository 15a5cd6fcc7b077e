"""FedFomo (algorithms/methods/clustered/fedfomo.py): a per-client oracle written from the paper (plain loops
over clients and candidate models, float64, the engine's mini-batch indices), the mutation
it catches, the first-round reduction to local SGD (bit for bit), the train/validation
split and its mini-batches."""

import math

import pytest
import torch
import torch.nn.functional as F

import algorithms.methods.clustered.fedfomo as fedfomo
from algorithms.methods.clustered.fedfomo import FedFomo, first_order_weights, split_sizes
from algorithms.engine.models import DNN
from algorithms.engine.steps import local_sgd

C = 4
# float64: sums over 6 clients and a few hundred parameters in another order
ATOL = 1e-12


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedFomo(**{"lr": 0.1, "local_rounds": 3, "batch_size": 5, "clients_per_round": 3,
                      "val_fraction": 0.25, **kw})


def o_forward(p, x):
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"]) @ p["fc2.weight"] + p["fc2.bias"]


def o_flat(p):
    return torch.cat([v.flatten() for v in p.values()])


def oracle(alg, fed, model, seed, rounds, clip=True):
    """Client models after ``rounds`` rounds; ``clip=False``: the mutation (negative
    first-order gains kept)."""
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    bank = [{k: v[0].clone() for k, v in w0.items()} for _ in range(fed.num_clients)]
    state = alg.init(fed, model, seed)
    positive_seen = False
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        new = {}
        for j, i in enumerate(phase.clients.tolist()):
            o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
            n_val = min(math.ceil(n * alg.val_fraction), n - 1) if n >= 2 else 0
            xv, yv = fed.train.x[o + n - n_val:o + n], fed.train.y[o + n - n_val:o + n]

            def val_loss(p):
                return float(F.cross_entropy(o_forward(p, xv), yv)) if n_val else 0.0

            own = bank[i]
            weights = {}
            for h in range(fed.num_clients):
                if h == i:
                    continue
                dist = float((o_flat(bank[h]) - o_flat(own)).norm())
                gain = (val_loss(own) - val_loss(bank[h])) / dist if dist > 0 else 0.0
                weights[h] = max(0.0, gain) if clip else gain
            total = sum(weights.values())
            if total > 0 or (not clip and total != 0):
                weights = {h: v / total for h, v in weights.items()}
            positive_seen |= any(v > 0 for v in weights.values())
            p = {k: own[k] + sum(v * (bank[h][k] - own[k]) for h, v in weights.items())
                 for k in own}
            for r in range(alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                assert bool((idx < o + n - n_val).all() and (idx >= o).all())   # training part
                leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
                loss = F.cross_entropy(o_forward(leaves, fed.train.x[idx]), fed.train.y[idx])
                grads = torch.autograd.grad(loss, list(leaves.values()))
                p = {k: v - alg.lr * g for (k, v), g in zip(p.items(), grads)}
            new[i] = p
        bank = [new.get(i, bank[i]) for i in range(fed.num_clients)]
    return bank, positive_seen


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
