"""FedALA (algorithms/methods/decoupled/fedala.py): with no ALA step it is FedAvg bit for bit; an independent
per-client loop written from Zhang et al., AAAI 2023 (eq. 4: Θ̂ = Θ_i + (Θ − Θ_i) ⊙ W on the
higher layers; eq. 5: W's gradient by autograd with respect to W itself, clipped to [0, 1];
a client's first ALA with more steps) gives the same models and weights; dropping the
clipping is caught."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from algorithms.engine.base import sample_clients
from algorithms.methods.decoupled.fedala import FedALA, ala_mix
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import DNN
from synthetic.federation import Federation

SEED = 8


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(6)
    sizes = [14, 30, 9, 22, 17]
    ys = [rng.choice(3, n, p=p) for n, p in zip(sizes, [[.7, .2, .1], [.1, .1, .8],
                                                        [.3, .7, 0], [.2, .6, .2], [.4, .3, .3]])]
    centres = rng.randn(3, 4) * 2
    xs = [centres[y] + rng.randn(len(y), 4) for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return DNN(4, 3, hidden=6)


KW = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


def test_no_ala_step_is_fedavg_bit_for_bit(fed, model):
    ala, avg = FedALA(ala_steps=0, ala_start_steps=0, **KW), FedAvg(**KW)
    a, b = ala.init(fed, model, seed=SEED), avg.init(fed, model, seed=SEED)
    for _ in range(3):
        a, b = ala.round(a, fed, model), avg.round(b, fed, model)
    assert all(torch.equal(a.models["global"][k], v) for k, v in b.models["global"].items())


def test_mix_is_the_papers_formula(model):
    g, loc = model.init(2, seed=1, same=False), model.init(2, seed=2, same=False)
    w = {"fc2.weight": torch.rand(2, 6, 3, generator=torch.Generator().manual_seed(0)),
         "fc2.bias": torch.tensor([[0.0, 1.0, 0.5]] * 2)}
    mixed = ala_mix(g, loc, w)
    for k in w:   # eq. 4: Θ_i + (Θ − Θ_i) ⊙ W (float32 rounding of two forms)
        torch.testing.assert_close(mixed[k], loc[k] + (g[k] - loc[k]) * w[k])
    assert torch.equal(mixed["fc1.weight"], g["fc1.weight"])      # lower layers: Θ


def oracle_round(alg, state, fed, model, *, clip=True):
    """One FedALA round, client by client: W by autograd on L(Θ_i + (Θ − Θ_i) ⊙ W) (lower
    layers = Θ), clipped to [0, 1] (``clip=False``: the wrong variant), ala_start_steps in
    the client's first ALA, none while Θ_i = Θ on the higher layers; R SGD steps; FedAvg."""
    gen = state.generator()
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen)
    most = max(alg.ala_steps, alg.ala_start_steps)
    ala_b = fed.sample_batches(most, alg.batch_size, state.generator(1))[:, chosen]
    theta = {k: v[0] for k, v in state.models["global"].items()}
    locals_ = {k: v.clone() for k, v in state.models["local"].items()}
    weights = {k: v.clone() for k, v in state.models["ala_weights"].items()}
    started = state.tensors["ala_started"].clone()
    total = sum(int(fed.train.counts[i]) for i in chosen)
    mean = {k: torch.zeros_like(v) for k, v in theta.items()}

    def loss(p, x, y):
        h = torch.relu(x @ p["fc1.weight"] + p["fc1.bias"])
        return F.cross_entropy(h @ p["fc2.weight"] + p["fc2.bias"], y)

    for j, i in enumerate(chosen.tolist()):
        loc = {k: v[i] for k, v in locals_.items()}
        w = {k: v[i].clone() for k, v in weights.items()}
        differs = any(bool((theta[k] != loc[k]).any()) for k in w)
        steps = 0 if not differs else (alg.ala_steps if started[i] else alg.ala_start_steps)
        for s in range(steps):
            x, y = fed.train.gather(ala_b[s, j])
            leaves = {k: v.clone().requires_grad_(True) for k, v in w.items()}
            mixed = {k: loc[k] + (theta[k] - loc[k]) * leaves[k] if k in w else theta[k]
                     for k in theta}
            grads = torch.autograd.grad(loss(mixed, x, y), list(leaves.values()))
            w = {k: (w[k] - alg.ala_lr * g) for k, g in zip(w, grads)}
            w = {k: v.clamp(0, 1) if clip else v for k, v in w.items()}
        p = {k: (loc[k] + (theta[k] - loc[k]) * w[k] if k in w else theta[k]).detach()
             for k in theta}
        for r in range(alg.local_rounds):
            x, y = fed.train.gather(batches[r, i])
            leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
            grads = torch.autograd.grad(loss(leaves, x, y), list(leaves.values()))
            p = {k: p[k] - alg.lr * g for k, g in zip(p, grads)}
        for k in locals_:
            locals_[k][i] = p[k]
        for k in weights:
            weights[k][i] = w[k]
        started[i] = 1.0 if differs else started[i]
        for k in mean:
            mean[k] = mean[k] + int(fed.train.counts[i]) / total * p[k]
    return state.next({"global": {k: v.unsqueeze(0) for k, v in mean.items()}, "local": locals_,
                       "ala_weights": weights}, {"ala_started": started})


def _max_diff(a, b):
    return max([float((a.models[m][k] - b.models[m][k]).abs().max())
                for m in a.models for k in a.models[m]]
               + [float((a.tensors[k] - b.tensors[k]).abs().max()) for k in a.tensors])


ALA = dict(ala_steps=2, ala_start_steps=4, ala_lr=1.0)


def test_engine_equals_independent_per_client_oracle(fed, model):
    alg = FedALA(**ALA, **KW)
    engine = oracle = alg.init(fed, model, seed=SEED)
    for _ in range(4):
        engine = alg.round(engine, fed, model)
        oracle = oracle_round(alg, oracle, fed, model)
    # float64: Θ − (Θ − Θ_i)(1 − W) vs Θ_i + (Θ − Θ_i)W and the chain rule vs autograd in
    # W: ~1e-16 per step
    assert _max_diff(engine, oracle) < 1e-12
    w = engine.models["ala_weights"]["fc2.weight"]
    assert 0.0 <= float(w.min()) < 1.0
    # round 0 skips ALA (Θ_i = Θ); rounds 1–3 hold 9 ALAs of which at most 5 are first ones:
    # both step counts were compared
    assert float(engine.tensors["ala_started"].sum()) == 5


def test_dropping_the_clipping_is_caught(fed, model):
    alg = FedALA(**ALA, **KW)
    s = alg.round(alg.init(fed, model, seed=SEED), fed, model)
    wrong = oracle_round(alg, s, fed, model, clip=False)
    assert _max_diff(alg.round(s, fed, model), wrong) > 1e-6


def test_every_help_text_renders_in_the_cli(capsys):
    """argparse formats help with %: a bare % in a hyper-parameter's help (FedALA's "80%")
    broke ``pflt flower-sim --help``, which lists every algorithm's options."""
    from pflt.cli import main

    for command in (["flower-sim", "--help"], ["run", "--algorithm", "fedala", "--help"]):
        try:
            code = main(command)
        except SystemExit as stop:       # argparse's own --help exits
            code = stop.code
        assert code == 0
        assert "--ala-steps" in capsys.readouterr().out
