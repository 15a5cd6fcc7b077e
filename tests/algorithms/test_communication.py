"""algorithms.engine.communication: what the phases exchange, counted from the models'
sizes (issue 36: communication per round in a run's summary)."""

import pytest
import torch

from algorithms import get_algorithm, run
from algorithms.engine.communication import METER, counting, entries
from algorithms.engine.models import build_model
from synthetic import fedprox


@pytest.fixture(scope="module")
def setting():
    fed = fedprox.federation(0.5, 0.5, seed=0, num_clients=6)
    model = build_model("mlr", fed)
    size = sum(v.numel() for v in model.init(1, seed=0).values())   # one model's numbers
    return fed, model, size


@pytest.mark.parametrize("name, models_each_way", [("fedavg", 1), ("scaffold", 2)])
def test_each_sampled_client_gets_the_sent_models_and_uploads_its_own(setting, name,
                                                                      models_each_way):
    """FedAvg: w down, w_i up; SCAFFOLD: (x, c) down, (y_i, Δc_i) up — per sampled client."""
    fed, model, size = setting
    alg = get_algorithm(name)(clients_per_round=3, local_rounds=1)
    with counting() as meter:
        run(alg, fed, model, rounds=2, seed=0, eval_every=2, progress=False)
    per = meter.per_round()
    assert per["rounds"] == 2
    assert per["down_numbers"] == 3 * models_each_way * size
    assert per["up_numbers"] == 3 * models_each_way * size
    assert per["down_bytes"] == 4 * per["down_numbers"]              # float32


def test_nothing_is_counted_outside_the_block(setting):
    fed, model, _ = setting
    assert METER.get() is None
    with counting() as meter:
        pass
    run(get_algorithm("fedavg")(clients_per_round=3, local_rounds=1), fed, model, rounds=1,
        seed=0, eval_every=1, progress=False)
    assert meter.per_round() == {} and METER.get() is None


def test_entries_of_nested_trees():
    tree = {"a": torch.zeros(2, 3, dtype=torch.float64), "b": {"c": torch.zeros(4)}}
    assert entries(tree) == (10, 6 * 8 + 4 * 4)


def test_pflt_run_summary_says_it(tmp_path, capsys):
    import json

    from pflt.cli import main

    out = tmp_path / "r"
    assert main(["run", "--algorithm", "fedavg", "--clients", "6", "--clients-per-round", "3",
                 "--local-rounds", "1", "--rounds", "2", "--no-progress", "--out",
                 str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["communication_down_numbers_per_round"] == 3 * 610     # MLR 60·10 + 10
    assert "communication per round" in capsys.readouterr().out
