"""EVERY registered algorithm under Flower equals the in-process batched engine (float64).

The Flower run (in-process grid, messages through Flower's protobuf serde) executes the
algorithm's own contract functions: ``first_phase``/``server_aggregate`` on the server,
``client_update`` with N = 1 on each client node.  The engine runs the same functions
batched over the participants.  Only the rounding of batched (N rows) vs single-row kernels
could differ; measured max difference: 0 for every algorithm's state (models and tensors),
≤ 4.5e-16 for the evaluation history (sums of per-client terms in another order).  The
printed line per algorithm is the report (``pytest -s``).
"""

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower'")

from algorithms.engine.base import hyperparameters, registry  # noqa: E402
from algorithms.engine.contract import engine_round, run_phases  # noqa: E402
from algorithms.engine.models import build_model  # noqa: E402
from algorithms.engine.runner import run  # noqa: E402
from algorithms.flower.local import simulate  # noqa: E402
from algorithms.flower.records import Settings  # noqa: E402
from synthetic.federation import Federation  # noqa: E402

N, ROUNDS, SEED = 4, 4, 7
# few clients/rounds; PPFE's schedule crosses two stage transitions, L2SGD flips p = 0.5
# coins (several averaging exchanges per round), CGPFL-Heur selects K in round 1
SMALL = {"local_rounds": 2, "inner_steps": 2, "batch_size": 4, "clients_per_round": 2,
         "head_steps": 2, "total_rounds": 5, "stages": 3, "stage_fractions": "2,2,1",
         "select_round": 1, "num_contexts": 2, "finetune_steps": 2, "avg_prob": 0.5}
# float64 rounding of batched vs one-row kernels, a few hundred ops: far below 1e-12
STATE_ATOL = 1e-12
# accuracies/losses: sums of 4 per-client float64 terms in another order
HISTORY_ATOL = 1e-12


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(0)
    sizes = [12, 25, 17, 30]                                  # ragged clients
    centres = rng.randn(3, 5)
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [centres[y] + rng.randn(len(y), 5) for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


# variants whose client/server split differs from the defaults
VARIANTS = {"perfedavg[adapt_on=test]": ("perfedavg", {"adapt_on": "test"}),
            "cgpfl[local_step=paper]": ("cgpfl", {"local_step": "paper"}),
            "cgpfl-heur[select_on=personalized]": ("cgpfl-heur", {"select_on": "personalized"}),
            "ppfe[local_update=joint,beta_rule=alpha]": ("ppfe", {"local_update": "joint",
                                                                 "beta_rule": "alpha"})}


def build(case):
    name, extra = VARIANTS.get(case, (case, {}))
    cls = registry()[name]
    fields = {f.name for f in hyperparameters(cls)}
    return cls(**{**{k: v for k, v in SMALL.items() if k in fields}, **extra})


def max_state_difference(a, b) -> float:
    assert a.round == b.round and sorted(a.models) == sorted(b.models)
    assert sorted(a.tensors) == sorted(b.tensors)
    diffs = [0.0]
    for m, params in b.models.items():
        assert sorted(a.models[m]) == sorted(params), m
        for k, v in params.items():
            assert a.models[m][k].dtype == v.dtype and a.models[m][k].shape == v.shape, (m, k)
            diffs.append(float((a.models[m][k] - v).abs().max()) if v.numel() else 0.0)
    for k, v in b.tensors.items():
        assert a.tensors[k].shape == v.shape, k
        diffs.append(float((a.tensors[k].double() - v.double()).abs().max()) if v.numel() else 0.0)
    return max(diffs)


@pytest.mark.parametrize("name", sorted(registry()) + sorted(VARIANTS))
def test_flower_equals_engine_for_every_algorithm(name, fed):
    alg = build(name)
    model = build_model("dnn", fed, hidden=4)
    engine = run(alg, fed, model, rounds=ROUNDS, seed=SEED, progress=False)
    flower = simulate(Settings.of(alg, num_clients=N, seed=SEED, model="dnn", hidden=4), fed,
                      rounds=ROUNDS)
    diff = max_state_difference(flower.state, engine.state)
    hist = max(abs(got[k] - want[k]) for got, want in zip(flower.history, engine.history.entries)
               for k in got if k != "round")
    print(f"\n{name}: Flower vs engine max |difference| state {diff:.3g}, history {hist:.3g}")
    assert diff <= STATE_ATOL
    assert [e["round"] for e in flower.history] == [e["round"] for e in engine.history.entries]
    assert hist <= HISTORY_ATOL
    assert flower.failures == []


def test_the_comparison_sees_a_changed_client_update(fed, monkeypatch):
    """The equality above can fail: perturb one client's upload under Flower only."""
    alg = build("ditto")
    model = build_model("dnn", fed, hidden=4)
    engine = run(alg, fed, model, rounds=2, seed=SEED, progress=False)
    cls = type(alg)
    original = cls.client_update

    def skewed(self, phase, model, view):
        kept, upload = original(self, phase, model, view)
        if view.clients.numel() == 1 and int(view.clients[0]) == 1:
            upload = {"global": {k: v * (1 + 1e-9) for k, v in upload["global"].items()}}
        return kept, upload

    monkeypatch.setattr(cls, "client_update", skewed)
    flower = simulate(Settings.of(alg, num_clients=N, seed=SEED, model="dnn", hidden=4), fed,
                      rounds=2)
    assert max_state_difference(flower.state, engine.state) > STATE_ATOL


@pytest.mark.parametrize("name", ["fedavg", "cgpfl"])
def test_failed_client_is_left_out_and_recorded(name, fed):
    """Client 1 fails in round 1: the run goes on, its upload is not aggregated (= the
    engine's round with the phase restricted to the others), the failure is recorded.
    CGPFL: every client uploads; the server clusters the three that did."""
    alg = build(name)
    if name == "fedavg":
        alg = type(alg)(**{**{f.name: getattr(alg, f.name) for f in hyperparameters(type(alg))},
                           "clients_per_round": 4})
    model = build_model("dnn", fed, hidden=4)
    flower = simulate(Settings.of(alg, num_clients=N, seed=SEED, model="dnn", hidden=4), fed,
                      rounds=3, fail=lambda client, t, phase: client == 1 and t == 1,
                      errors_as_replies=True)
    assert [(f["round"], f["phase"], f["clients"]) for f in flower.failures] == [(1, "train", [1])]
    state = alg.init(fed, model, SEED)
    state = engine_round(alg, state, fed, model)
    phase = alg.first_phase(state, fed, model).only([0, 2, 3])
    state = run_phases(alg, state, fed, model, phase).replace(round=2)
    state = engine_round(alg, state, fed, model)
    assert max_state_difference(flower.state, state) <= STATE_ATOL
    full = run(alg, fed, model, rounds=3, seed=SEED, progress=False).state
    assert max_state_difference(flower.state, full) > 1e-6      # client 1 really was left out


def test_checkpoint_and_resume_equal_an_uninterrupted_run(fed, tmp_path):
    from algorithms.engine.checkpoint import load_checkpoint

    alg = build("pfedme")
    settings = Settings.of(alg, num_clients=N, seed=SEED, model="dnn", hidden=4)
    whole = simulate(settings, fed, rounds=4)
    first = simulate(settings, fed, rounds=2, checkpoint=tmp_path / "c.pt", checkpoint_every=1)
    saved = load_checkpoint(tmp_path / "c.pt", alg)
    assert saved.round == 2 and max_state_difference(saved, first.state) == 0.0
    resumed = simulate(settings, fed, rounds=4, state=saved)
    assert max_state_difference(resumed.state, whole.state) == 0.0
    assert [e["round"] for e in resumed.history] == [3, 4]
