"""FedRep, FedPer, LG-FedAvg (algorithms/engine/heads.py), FedBABU and FedAvg+FT
(algorithms/methods/averaging/finetuned.py): learning, determinism, shared/personal invariants, an independent
per-client reference loop, FedBABU's frozen head, FedAvg+FT's FedAvg trajectory, accounting."""

import pytest
import torch

from algorithms.engine.base import State, get_algorithm, round_generator, sample_clients
from algorithms.engine.heads import split_keys
from algorithms.methods.decoupled.fedrep import FedPer, FedRep, LGFedAvg
from algorithms.engine.evaluation import evaluate
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.averaging.finetuned import FedAvgFT, FedBABU
from algorithms.engine.models import DNN, MLR
from algorithms.engine.runner import run

NAMES = ["fedrep", "fedper", "lgfedavg", "fedbabu", "fedavg-ft"]
HIDDEN = 8


@pytest.fixture(scope="module")
def model():
    return DNN(6, 4, hidden=HIDDEN)


def _make(name, **kw):
    return get_algorithm(name)(**{"lr": 0.1, "clients_per_round": 3, **kw})


@pytest.mark.parametrize("name", NAMES)
def test_learns_planted_problem_above_chance(fed, model, name):
    res = run(_make(name), fed, model, rounds=15, seed=0, eval_every=15, progress=False)
    # chance is 1/3 (3 classes per client); FedAvg's global model reaches ≈ 0.44 here
    assert res.history.last()["personalized_accuracy"] > 0.5


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_same_seed(fed, model, name):
    alg = _make(name)
    a = run(alg, fed, model, rounds=3, seed=5, progress=False).state
    b = run(alg, fed, model, rounds=3, seed=5, progress=False).state
    for part in a.models:
        for k in a.models[part]:
            assert torch.equal(a.models[part][k], b.models[part][k])


def _rows_equal(t):
    return bool((t == t[:1]).all())


@pytest.mark.parametrize("name,shared_layer,personal_layer", [
    ("fedrep", "fc1", "fc2"), ("fedper", "fc1", "fc2"), ("lgfedavg", "fc2", "fc1")])
def test_shared_part_identical_personal_part_differs(fed, model, name, shared_layer, personal_layer):
    alg = _make(name)
    state = alg.round(alg.init(fed, model, seed=0), fed, model)
    p = alg.evaluated(state)["personalized"]
    assert _rows_equal(p[f"{shared_layer}.weight"]) and _rows_equal(p[f"{shared_layer}.bias"])
    assert not _rows_equal(p[f"{personal_layer}.weight"])


def _reference_round(alg, state, fed, model):
    """Independent per-client loop (autograd on one client at a time): FedRep / FedPer."""
    gen = round_generator(state.seed, state.round)
    steps = alg.head_steps + alg.local_rounds if isinstance(alg, FedRep) else alg.local_rounds
    batches = fed.sample_batches(steps, alg.batch_size, gen)
    chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen).tolist()
    body_keys, head_keys = split_keys(model, alg.head_layers)
    bodies, heads = [], {}
    for i in chosen:
        p = {**{k: v.clone() for k, v in state.models["shared"].items()},
             **{k: v[i:i + 1].clone() for k, v in state.models["personal"].items()}}
        for r in range(steps):
            if isinstance(alg, FedRep):
                keys = head_keys if r < alg.head_steps else body_keys
            else:
                keys = body_keys + head_keys
            leaves = {k: v.detach().requires_grad_(k in keys) for k, v in p.items()}
            x, y = fed.train.gather(batches[r, i:i + 1])
            loss = model.per_client_loss(leaves, x, y).sum()
            grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
            p = {k: v.detach() for k, v in leaves.items()}
            for k, g in zip(keys, grads):
                p[k] = p[k] - alg.lr * g
        bodies.append({k: p[k] for k in body_keys})
        heads[i] = {k: p[k] for k in head_keys}
    body = {k: sum(b[k] for b in bodies) / len(bodies) for k in body_keys}
    return body, heads


@pytest.mark.parametrize("cls", [FedRep, FedPer])
def test_round_equals_per_client_reference_loop(fed, model, cls):
    alg = cls(lr=0.1, clients_per_round=3, local_rounds=3, batch_size=5,
              **({"head_steps": 2} if cls is FedRep else {}))
    state = alg.init(fed, model, seed=2)
    state = alg.round(state, fed, model)          # heads now differ between clients
    body, heads = _reference_round(alg, state, fed, model)
    new = alg.round(state, fed, model)
    for k, v in body.items():  # float64; differs only by summation order
        torch.testing.assert_close(new.models["shared"][k], v, rtol=0, atol=1e-12)
    for i, h in heads.items():
        for k, v in h.items():
            torch.testing.assert_close(new.models["personal"][k][i:i + 1], v, rtol=0, atol=1e-12)


def test_fedbabu_head_frozen_during_training(fed, model):
    alg = _make("fedbabu", finetune_steps=5)
    init = alg.init(fed, model, seed=0)
    state = run(alg, fed, model, rounds=4, seed=0, progress=False).state
    for k in ("fc2.weight", "fc2.bias"):
        assert torch.equal(state.models["head"][k], init.models["head"][k])
        assert torch.equal(alg.evaluated(state)["global"][k], init.models["head"][k])
    assert not torch.equal(state.models["body"]["fc1.weight"], init.models["body"]["fc1.weight"])
    pers = alg.evaluated(state)["personalized"]
    # head fine-tuning: bodies are the global body, heads moved away from the frozen head
    assert torch.equal(pers["fc1.weight"], state.models["body"]["fc1.weight"].expand_as(pers["fc1.weight"]))
    assert not torch.equal(pers["fc2.weight"][0], init.models["head"]["fc2.weight"][0])


def test_fedavg_ft_global_is_fedavg_and_finetuning_helps(fed, model):
    ft = _make("fedavg-ft", finetune_steps=10)
    avg = FedAvg(lr=0.1, clients_per_round=3)
    a = run(ft, fed, model, rounds=5, seed=4, progress=False).state
    b = run(avg, fed, model, rounds=5, seed=4, progress=False).state
    for k in b.models["global"]:
        assert torch.equal(a.models["global"][k], b.models["global"][k])
    acc_g, _ = evaluate(model, a.models["global"], fed.test)
    acc_p, _ = evaluate(model, a.models["personalized"], fed.test)
    assert acc_p.mean() > acc_g.mean()


def test_head_layers_validation_and_full_head(fed, model):
    with pytest.raises(ValueError, match="head_layers"):
        FedRep(clients_per_round=3, head_layers=3).init(fed, model, seed=0)
    with pytest.raises(ValueError, match="aggregation"):
        FedPer(aggregation="median")
    with pytest.raises(ValueError, match="finetune_part"):
        FedBABU(finetune_part="body")
    with pytest.raises(ValueError, match="clients_per_round"):
        FedAvgFT(clients_per_round=10).init(fed, model, seed=0)
    # head_layers = L: nothing shared — FedPer is local training, LG-FedAvg is FedAvg
    mlr = MLR(6, 4)
    alg = FedPer(lr=0.1, clients_per_round=3)
    s = alg.round(alg.init(fed, mlr, seed=0), fed, mlr)
    assert s.models["shared"] == {} and alg.diagnostics(s, fed, mlr)["comm_params_total"] == 0
    lg = LGFedAvg(lr=0.1, clients_per_round=3)
    s = lg.round(lg.init(fed, mlr, seed=0), fed, mlr)
    assert set(lg.evaluated(s)) == {"global"}


@pytest.mark.parametrize("name,shared", [
    ("fedrep", 6 * HIDDEN + HIDDEN), ("fedper", 6 * HIDDEN + HIDDEN),
    ("lgfedavg", HIDDEN * 4 + 4), ("fedbabu", 6 * HIDDEN + HIDDEN),
    ("fedavg-ft", 6 * HIDDEN + HIDDEN + HIDDEN * 4 + 4)])
def test_communication_accounting(fed, model, name, shared):
    alg = _make(name)
    state = run(alg, fed, model, rounds=3, seed=0, progress=False).state
    d = alg.diagnostics(state, fed, model)
    assert d["comm_params_per_round"] == 2 * 3 * shared          # S = 3, down + up
    assert d["comm_params_total"] == 3 * 2 * 3 * shared


def test_state_is_a_new_object(fed, model):
    alg = _make("fedrep")
    s0 = alg.init(fed, model, seed=0)
    before = {k: v.clone() for k, v in s0.models["personal"].items()}
    s1 = alg.round(s0, fed, model)
    assert isinstance(s1, State) and s1.round == 1
    for k, v in before.items():
        assert torch.equal(s0.models["personal"][k], v)
