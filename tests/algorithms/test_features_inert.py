"""Hyper-parameters that cannot change the result (algorithms.engine.features.
inert_without_body, each algorithm's ``inert_hyperparameters``): with an MLR (no body)
FedProto's and FedPAC's λ and pFedFDA's η leave every round's state bit-identical — the
claim the note makes is checked, not assumed — while with a DNN they do change it (so the
note is not printed there); ``pflt run`` prints the note and records it in summary.json."""

import json

import pytest
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.models import DNN, MLR
from algorithms.engine.runner import run

C = 4
CASES = [("fedproto", "lam", 1.0, 50.0), ("fedpac", "lam", 1.0, 50.0),
         ("pfedfda", "lr", 0.02, 0.5)]
SMALL = dict(local_rounds=3, batch_size=5, clients_per_round=4)


def _state(fed, model, name, hp, value):
    alg = get_algorithm(name)(**{**SMALL, hp: value})
    return alg, run(alg, fed, model, rounds=3, seed=2, eval_every=3, progress=False).state


def _same(a, b) -> bool:
    pairs = [(a.models[m][k], b.models[m][k]) for m in a.models for k in a.models[m]]
    pairs += [(a.tensors[k], b.tensors[k]) for k in a.tensors]
    return all(torch.equal(x, y) for x, y in pairs)


@pytest.mark.parametrize("name, hp, low, high", CASES)
def test_the_inert_hyperparameter_cannot_change_an_mlr_run(fed, name, hp, low, high):
    model = MLR(fed.feature_shape[0], fed.num_classes)
    alg, a = _state(fed, model, name, hp, low)
    _, b = _state(fed, model, name, hp, high)
    assert _same(a, b)                                     # the note's claim, bit for bit
    assert set(alg.inert_hyperparameters(model)) == {hp}


@pytest.mark.parametrize("name, hp, low, high", CASES)
def test_with_a_body_the_hyperparameter_matters_and_no_note(fed, name, hp, low, high):
    model = DNN(fed.feature_shape[0], fed.num_classes, hidden=5)
    alg, a = _state(fed, model, name, hp, low)
    _, b = _state(fed, model, name, hp, high)
    assert not _same(a, b)        # mutation: a note for every model would be wrong here
    assert alg.inert_hyperparameters(model) == {}


@pytest.mark.parametrize("name, hp", [(n, h) for n, h, _, _ in CASES])
def test_pflt_run_prints_the_note_and_records_it(tmp_path, capsys, name, hp):
    from pflt.cli import main

    out = tmp_path / "o"
    assert main(["run", "--algorithm", name, "--model", "mlr", "--clients", "3",
                 "--clients-per-round", "3", "--rounds", "1", "--no-progress",
                 "--out", str(out)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    option = "--" + hp.replace("_", "-")
    assert len(notes) == 1 and f"note: {name}: {option} " in notes[0]
    assert "cannot change the result" in notes[0]
    assert json.loads((out / "summary.json").read_text())["notes"] == [notes[0][len("note: "):]]


def test_flower_sim_prints_the_note_too(tmp_path, capsys):
    pytest.importorskip("flwr")
    from pflt.cli import main

    out = tmp_path / "o"
    assert main(["flower-sim", "--algorithm", "pfedfda", "--clients", "3",
                 "--clients-per-round", "3", "--rounds", "1", "--no-progress",
                 "--out", str(out)]) == 0
    assert "note: pfedfda: --lr 0.02 cannot change the result" in capsys.readouterr().err
    assert json.loads((out / "flower_summary.json").read_text())["notes"][0].startswith(
        "pfedfda: --lr")
