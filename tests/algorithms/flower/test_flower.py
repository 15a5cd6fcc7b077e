"""Registered algorithms under Flower equal the in-process batched engine.

What runs: the real Flower ``ServerApp`` (``PFLStrategy`` driven by
``flwr.serverapp.strategy.Strategy.start``) and ``ClientApp`` handlers
(``query.setup``/``query.init``/``train``/``evaluate``/``query.collect``), with per-client
models in each node's ``context.state``.  Fast tests deliver the messages over an
in-process ``Grid`` (contents serialised through Flower's protobuf serde both ways); the
``slow`` test runs ``flwr.simulation.run_simulation`` (Ray workers, offline env vars set)
for FedAvg and pFedMe in one simulation.  Independent oracles: the batched engine
(``algorithm.round``) and, for FedAvg/pFedMe, the per-client reference loops of
:mod:`algorithms.reference_loop` (no shared update code).
"""

import dataclasses

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower' "
                                   "(from the checkout: pip install -e '.[flower]', flwr[simulation]==1.41.0)")

from algorithms import reference_loop  # noqa: E402
from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.engine.models import build_model  # noqa: E402
from algorithms.engine.runner import run  # noqa: E402
from algorithms.flower.records import counts_federation  # noqa: E402
from algorithms.flower.app import load_client_data, settings_from_run_config  # noqa: E402
from algorithms.flower.client import KEPT, make_client_app  # noqa: E402
from algorithms.flower.local import (InProcessGrid, _task_identity, client_federation,  # noqa: E402
                                     simulate, simulate_many)
from algorithms.flower.records import Settings, pack, unpack  # noqa: E402
from algorithms.flower.strategy import make_server_app  # noqa: E402
from synthetic.federation import Federation  # noqa: E402

# Same code and the same draws; only batched (N rows) vs single-client (1 row) bmm kernels
# might round differently in float64 (~1e-16 relative per op, a few dozen ops) -> 1e-12.
ATOL = 1e-12
N, ROUNDS, SEED = 4, 3, 7

CASES = {   # id -> (algorithm, hyper-parameters)
    "fedavg": ("fedavg", dict(clients_per_round=2, local_rounds=3, batch_size=4)),
    "pfedme": ("pfedme", dict(clients_per_round=2, local_rounds=3, batch_size=4, inner_steps=2,
                              beta=0.8)),
    "ditto": ("ditto", dict(clients_per_round=2, local_rounds=3, batch_size=4)),
    "fedrep": ("fedrep", dict(clients_per_round=3, local_rounds=2, head_steps=2, batch_size=4)),
    "lgfedavg": ("lgfedavg", dict(clients_per_round=2, local_rounds=2, batch_size=4,
                                  aggregation="weighted")),
    "cgpfl": ("cgpfl", dict(num_contexts=2, local_rounds=2, batch_size=4, inner_steps=2)),
    # the paper's local step c = 2/N depends on N although each client sees N = 1
    "cgpfl-paper-step": ("cgpfl", dict(num_contexts=2, local_rounds=2, batch_size=4,
                                       inner_steps=2, local_step="paper")),
    "cgpfl-heur": ("cgpfl-heur", dict(local_rounds=2, batch_size=4, inner_steps=2,
                                      select_round=1, select_on="personalized")),
}
MODEL = {"fedrep": "dnn", "lgfedavg": "dnn"}


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    sizes = [12, 25, 17, 30]                                  # ragged clients
    centres = rng.randn(3, 5)
    ys = [rng.randint(0, 3, n) for n in sizes]
    xs = [centres[y] + rng.randn(len(y), 5) for y in ys]
    return xs, ys


@pytest.fixture(scope="module")
def fed(data):
    xs, ys = data
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


def setup(case, fed):
    name, hps = CASES.get(case, (case, {}))
    alg = get_algorithm(name)(**hps)
    model = build_model(MODEL.get(name, "mlr"), fed, hidden=4)
    settings = Settings.of(alg, num_clients=N, seed=SEED, model=MODEL.get(name, "mlr"), hidden=4)
    return alg, model, settings


def assert_states_close(got, want):
    assert got.round == want.round and sorted(got.models) == sorted(want.models)
    for m, params in want.models.items():
        for k, v in params.items():
            assert got.models[m][k].dtype == v.dtype and got.models[m][k].shape == v.shape
            torch.testing.assert_close(got.models[m][k], v, rtol=0, atol=ATOL, msg=f"{m}/{k}")
    for k, v in want.tensors.items():
        torch.testing.assert_close(got.tensors[k].cpu(), v.cpu(), rtol=0, atol=ATOL, msg=k)


@pytest.mark.parametrize("case", sorted(CASES))
def test_flower_run_equals_engine(case, fed):
    alg, model, settings = setup(case, fed)
    engine = run(alg, fed, model, rounds=ROUNDS, seed=SEED, progress=False)
    flower = simulate(settings, fed, rounds=ROUNDS, backend="inprocess")
    assert_states_close(flower.state, engine.state)
    # evaluation: Flower aggregates the clients' correct counts / loss sums per model
    assert [e["round"] for e in flower.history] == [e["round"] for e in engine.history.entries]
    for got, want in zip(flower.history, engine.history.entries):
        for key in want:
            if key.endswith(("_accuracy", "_accuracy_mean", "_loss")) and not key.endswith(
                    ("train_loss", "client_accuracy")):
                # sums of ≤ 4 float64 per-client terms in another order -> 1e-12
                assert got[key] == pytest.approx(want[key], abs=1e-12), key


@pytest.mark.parametrize("name, oracle", [("fedavg", reference_loop.fedavg_round),
                                          ("pfedme", reference_loop.pfedme_round)])
def test_flower_equals_per_client_reference_loop(name, oracle, fed):
    """Independent oracle: the plain per-client loops share no update code with the engine."""
    alg, model, settings = setup(name, fed)
    state = alg.init(fed, model, SEED)
    for _ in range(ROUNDS):
        state = oracle(alg, state, fed, model)
    flower = simulate(settings, fed, rounds=ROUNDS, eval_every=ROUNDS)
    # the loop sums clients one by one instead of tensordot -> rounding-level differences
    for m in state.models:
        for k in state.models[m]:
            torch.testing.assert_close(flower.state.models[m][k], state.models[m][k],
                                       rtol=0, atol=1e-12)


def test_per_client_state_lives_in_context_state(fed):
    alg, model, settings = setup("ditto", fed)
    results = []
    slices = [client_federation(fed, i) for i in range(N)]
    client = make_client_app(lambda ctx: (int(ctx.node_config["partition-id"]),
                                          slices[int(ctx.node_config["partition-id"])]))
    grid = InProcessGrid(client, N)
    from flwr.app import Context, RecordDict
    with _task_identity():
        make_server_app(settings, rounds=2, on_result=results.append)(
            grid, Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    engine = run(alg, fed, model, rounds=2, seed=SEED, progress=False).state
    for i, node in enumerate(grid.node_ids):
        kept = unpack(grid.contexts[node].state[KEPT])
        assert sorted(kept) == ["personalized"]
        torch.testing.assert_close(kept["personalized"]["fc.weight"],
                                   engine.models["personalized"]["fc.weight"][i:i + 1],
                                   rtol=0, atol=ATOL)
    assert results[0].flower.arrays is not None          # Flower's own Result was produced


def test_counts_federation_draws_the_engine_indices(fed):
    stub = counts_federation(fed.train.counts.tolist(), feature_shape=fed.feature_shape,
                                    num_classes=3, dtype=torch.float64)
    want = fed.sample_batches(3, 5, torch.Generator().manual_seed(11))
    got = stub.sample_batches(3, 5, torch.Generator().manual_seed(11))
    assert torch.equal(got, want)
    local = got - fed.train.offsets[None, :, None]
    assert bool((local >= 0).all()) and bool((local < fed.train.counts[None, :, None]).all())
    x, _ = stub.train.gather(got)
    assert x.shape == (3, N, 5, 5) and float(x.abs().sum()) == 0.0


def test_records_round_trip_keeps_dtype_shape_and_k_models():
    models = {"context": {"w": torch.randn(3, 4, 2, dtype=torch.float64)},     # K = 3 models
              "global": {"w": torch.randn(1, 4, 2, dtype=torch.float32), "b": torch.arange(2)[None]}}
    back = unpack(pack(models))
    for m in models:
        for k, v in models[m].items():
            assert back[m][k].dtype == v.dtype and torch.equal(back[m][k], v)
    with pytest.raises(ValueError, match="must not contain"):
        pack({"a/b": {"w": torch.zeros(1)}})
    s = Settings("pfedme", {"lam": 15.0, "aggregation": "weighted"}, 5, seed=3, hidden=7)
    assert Settings.from_record(s.to_record()) == s


def test_deployment_loader_gives_the_engine_client_split(data, tmp_path):
    """A SuperNode loading its own .npz gets exactly client i of the in-process federation."""
    from flwr.app import Context, RecordDict

    xs, ys = data
    fed = Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                        dtype=torch.float64)
    i = 2
    np.savez(tmp_path / "c2.npz", x=xs[i], y=ys[i])
    ctx = Context(run_id=0, node_id=1, state=RecordDict(),
                  node_config={"partition-id": i, "data-path": str(tmp_path / "c2.npz")},
                  run_config={"seed": SEED, "num-classes": 3, "dtype": "float64"})
    index, mine = load_client_data(ctx)
    want = client_federation(fed, i)
    assert index == i
    assert torch.equal(mine.train.x, want.train.x) and torch.equal(mine.test.y, want.test.y)
    ctx.node_config.pop("data-path")
    with pytest.raises(ValueError, match="data-path"):
        load_client_data(ctx)


def test_run_config_settings_and_errors():
    s = settings_from_run_config({"algorithm": "pfedme", "num-clients": 4, "rounds": 2,
                                  "hp.lam": 12.0})
    assert s.hyperparameters["lam"] == 12.0 and s.hyperparameters["inner_steps"] == 5
    with pytest.raises(ValueError, match="needs 'rounds'"):
        settings_from_run_config({"algorithm": "pfedme", "num-clients": 4})
    with pytest.raises(ValueError, match="unknown run-config keys"):
        settings_from_run_config({"algorithm": "pfedme", "num-clients": 4, "rounds": 1, "lr": 1})
    with pytest.raises(ValueError, match="lam"):
        settings_from_run_config({"algorithm": "pfedme", "num-clients": 4, "rounds": 1,
                                  "hp.lam": -1.0})


def test_bad_inputs(fed):
    _, _, settings = setup("fedavg", fed)
    with pytest.raises(ValueError, match="num_clients"):
        simulate(dataclasses.replace(settings, num_clients=3), fed, rounds=1)
    with pytest.raises(ValueError, match="backend"):
        simulate(settings, fed, rounds=1, backend="grpc")
    # clients that disagree on the number of classes are refused at setup
    slices = [client_federation(fed, i) for i in range(N)]
    slices[1] = dataclasses.replace(slices[1], num_classes=4)
    client = make_client_app(lambda ctx: (int(ctx.node_config["partition-id"]),
                                          slices[int(ctx.node_config["partition-id"])]))
    from flwr.app import Context, RecordDict
    with _task_identity(), pytest.raises(ValueError, match="disagree on num_classes"):
        make_server_app(settings, rounds=1)(InProcessGrid(client, N), Context(
            run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}))


def test_cli_flower_sim_matches_engine(capsys, tmp_path):
    from pflt.cli import main

    code = main(["flower-sim", "--algorithm", "fedavg", "--clients", "4", "--rounds", "2",
                 "--dtype", "float64", "--clients-per-round", "2", "--local-rounds", "2",
                 "--compare", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    line = next(l for l in out.splitlines() if l.startswith("max_abs_difference_vs_engine"))
    assert float(line.split()[-1]) <= ATOL
    assert (tmp_path / "flower_history.json").exists()
    # an algorithm with server-side state (the hypernetwork), checkpoint and resume
    args = ["flower-sim", "--algorithm", "pfedhn", "--clients", "4", "--dtype", "float64",
            "--clients-per-round", "2", "--local-rounds", "2", "--no-progress"]
    assert main(args + ["--rounds", "1", "--checkpoint-every", "1", "--out",
                        str(tmp_path / "hn")]) == 0
    assert (tmp_path / "hn" / "checkpoint.pt").exists()
    capsys.readouterr()
    assert main(["flower-sim", "--resume", str(tmp_path / "hn"), "--rounds", "2",
                 "--compare"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines()
                if l.startswith("max_abs_difference_vs_engine"))
    assert float(line.split()[-1]) <= ATOL


@pytest.mark.slow
def test_ray_simulation_equals_engine(fed):
    """Flower's simulation engine (Ray workers, serialised messages, offline): FedAvg and
    pFedMe in one simulation (one Ray start-up, tens of seconds on 2 cores)."""
    cases = [setup(name, fed) for name in ("fedavg", "pfedme")]
    results = simulate_many([s for _, _, s in cases], fed, rounds=2, backend="ray")
    for (alg, model, _), result in zip(cases, results):
        engine = run(alg, fed, model, rounds=2, seed=SEED, progress=False)
        assert_states_close(result.state, engine.state)


def test_deployment_server_app_checkpoints_and_resumes(fed, tmp_path):
    """The module-level ServerApp of ``flwr run`` deployments (run config as Flower passes
    it): IFCA (server-side cluster models, an init exchange) to round 2 with checkpoints,
    then resumed to round 3 — the written state equals the engine's."""
    from flwr.app import Context, RecordDict
    from algorithms.flower.app import server_app

    slices = [client_federation(fed, i) for i in range(N)]
    client = make_client_app(lambda ctx: (int(ctx.node_config["partition-id"]),
                                          slices[int(ctx.node_config["partition-id"])]))
    rc = {"algorithm": "ifca", "num-clients": N, "rounds": 2, "seed": SEED, "model": "dnn",
          "hidden": 4, "out-dir": str(tmp_path), "checkpoint-every": 1,
          "hp.clients_per_round": 2, "hp.local_rounds": 2, "hp.batch_size": 4,
          "hp.num_contexts": 2}
    with _task_identity():
        server_app(InProcessGrid(client, N), Context(run_id=0, node_id=0, node_config={},
                                                     state=RecordDict(), run_config=rc))
        assert (tmp_path / "checkpoint.pt").exists()
        server_app(InProcessGrid(client, N), Context(
            run_id=0, node_id=0, node_config={}, state=RecordDict(),
            run_config={**rc, "rounds": 3, "resume": True}))
    saved = torch.load(tmp_path / "state.pt", weights_only=True)
    alg = get_algorithm("ifca")(clients_per_round=2, local_rounds=2, batch_size=4, num_contexts=2)
    want = run(alg, fed, build_model("dnn", fed, hidden=4), rounds=3, seed=SEED,
               progress=False).state
    assert saved["round"] == 3
    for k, v in want.models["clusters"].items():
        torch.testing.assert_close(saved["models"]["clusters"][k], v, rtol=0, atol=ATOL)
    assert torch.equal(saved["tensors"]["assignment"], want.tensors["assignment"])
