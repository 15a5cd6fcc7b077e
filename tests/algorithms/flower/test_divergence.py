"""The Flower path keeps ``pflt run``'s divergence contract (algorithms.engine.runner's
``guarded_round`` / ``evaluation_divergence``, used by PFLStrategy): ``pflt flower-sim``
exits 1 naming the round, a deployment's ServerApp fails with outcome ``failed`` naming the
round; a run that does not diverge is unchanged.  Also: the "clients_trained" metric counts
the clients whose reply arrived (a gone client is not counted)."""

import json

import numpy as np
import pytest

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower'")

from flwr.app import Context, RecordDict  # noqa: E402

from algorithms.engine.runner import DivergenceError  # noqa: E402
from algorithms.flower.app import load_client_data, main as app_main  # noqa: E402
from algorithms.flower.client import make_client_app  # noqa: E402
from algorithms.flower.local import InProcessGrid, _task_identity  # noqa: E402
from pflt.cli import main  # noqa: E402

SMALL = ["--clients", "3", "--clients-per-round", "3", "--rounds", "3", "--no-progress"]


@pytest.mark.parametrize("hps, model", [
    (["--algorithm", "fedavg", "--lr", "1e30"], "global"),           # finite but exploded
    (["--algorithm", "pfedme", "--lr", "1e6", "--personal-lr", "1e6"], None),  # NaN
])
def test_flower_sim_stops_on_divergence_like_pflt_run(tmp_path, capsys, hps, model):
    out = tmp_path / "o"
    code = main(["flower-sim", *hps, *SMALL, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    # mutation: dropping the strategy's evaluation_divergence/guarded_round calls -> exit 0
    assert code == 1, err
    assert err.startswith("pflt flower-sim: error:") and "after round 1" in err
    assert "diverged" in err and (model is None or repr(model) in err)
    marker = json.loads((out / "diverged.json").read_text())
    assert marker["round"] == 1
    assert not (out / "flower_summary.json").exists()
    # the same run under pflt run stops at the same round (the one contract)
    code = main(["run", *hps, *SMALL, "--out", str(tmp_path / "r")])
    assert code == 1 and json.loads((tmp_path / "r" / "diverged.json").read_text())["round"] == 1


def test_flower_sim_that_does_not_diverge_exits_0(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["flower-sim", "--algorithm", "fedavg", *SMALL, "--out", str(out)]) == 0
    assert not (out / "diverged.json").exists()
    history = json.loads((out / "flower_history.json").read_text())
    assert [e["round"] for e in history] == [1, 2, 3]


def deployment_grid(tmp_path, rng_seed=0, n=3):
    """An in-process grid serving the deployment's own ClientApp (data from .npz files)."""
    rng = np.random.RandomState(rng_seed)
    grid = InProcessGrid(make_client_app(load_client_data), n)
    for i, nid in enumerate(grid.node_ids):
        y = rng.randint(0, 3, 20)
        np.savez(tmp_path / f"c{i}.npz", x=rng.randn(20, 4) + y[:, None], y=y)
        grid.contexts[nid].node_config["data-path"] = str(tmp_path / f"c{i}.npz")
    return grid


@pytest.mark.parametrize("lr, status", [(1e30, "failed"), (0.05, "completed")])
def test_deployment_server_fails_on_divergence(tmp_path, lr, status):
    grid = deployment_grid(tmp_path)
    out = tmp_path / "out"
    rc = {"algorithm": "fedavg", "num-clients": 3, "rounds": 3, "num-classes": 3,
          "dtype": "float64", "out-dir": str(out), "hp.lr": lr, "hp.clients_per_round": 3}
    for ctx in grid.contexts.values():
        ctx.run_config.update(rc)
    ctx = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config=rc)
    with _task_identity():
        if status == "failed":
            with pytest.raises(DivergenceError, match="after round 1"):
                app_main(grid, ctx)
        else:
            app_main(grid, ctx)
    outcome = json.loads((out / "outcome.json").read_text())
    assert outcome["status"] == status
    if status == "failed":
        assert outcome["round"] == 1 and "DivergenceError" in outcome["error"]
        assert "after round 1" in outcome["error"]
    assert (out / "history.json").is_file() and (out / "state.pt").is_file()
    assert code_of(out) == (1 if status == "failed" else 0)


def code_of(out) -> int:
    return main(["flower-outcome", str(out)])


def test_clients_trained_counts_the_clients_that_answered(tmp_path):
    """After a client is gone, the round's metric no longer counts it (it was the phase's
    participant count before: "clients_trained: 3" with a client gone)."""
    from algorithms.engine.base import get_algorithm
    from algorithms.flower.records import Settings
    from algorithms.flower.strategy import make_server_app

    grid = deployment_grid(tmp_path)
    dead = grid.node_ids[1]
    original = grid.push_messages

    def push(messages):                   # node 1 never answers a train message
        messages = list(messages)
        if any(m.metadata.message_type == "train" for m in messages):
            live = [m for m in messages if m.metadata.dst_node_id != dead]
            ids = iter(original(live))
            return [next(ids) if m.metadata.dst_node_id != dead else "lost" for m in messages]
        return original(messages)

    grid.push_messages = push
    for ctx in grid.contexts.values():
        ctx.run_config.update({"num-classes": 3, "dtype": "float64"})
    settings = Settings.of(get_algorithm("fedavg")(clients_per_round=3), num_clients=3, seed=0)
    results = []
    with _task_identity():
        make_server_app(settings, rounds=2, timeout=0.3, poll=0.01, on_result=results.append)(
            grid, Context(run_id=0, node_id=0, node_config={}, state=RecordDict(),
                          run_config={}))
    trained = results[0].flower.train_metrics_clientapp
    # mutation: "clients_trained": self.phase.clients.numel() -> 3 in both rounds
    assert [int(trained[r]["clients_trained"]) for r in (1, 2)] == [2, 2]
