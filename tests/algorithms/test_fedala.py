"""FedALA (algorithms/methods/decoupled/fedala.py): with no ALA step it is FedAvg bit for bit; an independent
per-client loop written from Zhang et al., AAAI 2023 (eq. 4: Θ̂ = Θ_i + (Θ − Θ_i) ⊙ W on the
higher layers; eq. 5: W's gradient by autograd with respect to W itself, clipped to [0, 1];
a client's first ALA with more steps) gives the same models and weights; dropping the
clipping is caught."""

import numpy as np
import pytest
import torch

from algorithms.methods.decoupled.fedala import FedALA, ala_mix
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import DNN
from synthetic.federation import Federation
from verification.oracles.decoupled import fedala_round as oracle_round

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
