"""Server exchanges that survive clients (algorithms.flower.exchange + PFLStrategy), in
process: a grid whose dead nodes never answer, and a restarted node (a new node id with
the same partition-id and an empty context) that must rejoin."""

import json
import threading
import time

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower'")

from flwr.app import Context, Error, Message, RecordDict  # noqa: E402
from flwr.common.constant import ErrorCode  # noqa: E402

from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.flower import exchange  # noqa: E402
from algorithms.flower.app import main as app_main  # noqa: E402
from algorithms.flower.client import make_client_app  # noqa: E402
from algorithms.flower.local import (InProcessGrid, RaySimulationError, _task_identity,  # noqa: E402
                                     client_federation, simulate)
from algorithms.flower.records import Settings  # noqa: E402
from algorithms.flower.strategy import make_server_app  # noqa: E402
from synthetic.federation import Federation  # noqa: E402

N, SEED, ROUNDS = 3, 5, 6
HPS = dict(clients_per_round=3, local_rounds=2, batch_size=4, inner_steps=2)


@pytest.fixture(scope="module")
def fed():
    rng = np.random.RandomState(0)
    ys = [rng.randint(0, 3, n) for n in (14, 19, 16)]
    xs = [rng.randn(len(y), 4) + y[:, None] for y in ys]
    return Federation.from_client_arrays(xs, ys, num_classes=3, seed=SEED, device="cpu",
                                         dtype=torch.float64)


class DyingGrid(InProcessGrid):
    """Messages to ``dead`` nodes are accepted and never answered (a killed SuperNode);
    ``hook(grid)`` runs before each push (the test's clock: kill, restart)."""

    def __init__(self, client_app, num_nodes, hook):
        super().__init__(client_app, num_nodes)
        self.dead: set[int] = set()
        self.hook = hook
        self.pushes = 0

    def push_messages(self, messages):
        self.hook(self)
        self.pushes += 1
        messages = list(messages)
        live = [m for m in messages if m.metadata.dst_node_id not in self.dead]
        ids = iter(super().push_messages(live))
        return [next(ids) if m.metadata.dst_node_id not in self.dead else f"lost-{id(m)}"
                for m in messages]

    def get_node_ids(self):
        return [n for n in self.node_ids if n not in self.dead]

    def restart(self, partition: int) -> int:
        """A new node id for ``partition`` with an empty context (a restarted SuperNode)."""
        node = max(self.node_ids) + 1
        self.node_ids.append(node)
        self.contexts[node] = Context(run_id=0, node_id=node, state=RecordDict(), run_config={},
                                      node_config={"partition-id": partition})
        return node


def run_dying(fed, hook):
    slices = [client_federation(fed, i) for i in range(N)]
    client = make_client_app(lambda ctx: (int(ctx.node_config["partition-id"]),
                                          slices[int(ctx.node_config["partition-id"])]))
    settings = Settings.of(get_algorithm("pfedme")(**HPS), num_clients=N, seed=SEED)
    results = []
    grid = DyingGrid(client, N, hook)
    with _task_identity():
        make_server_app(settings, rounds=ROUNDS, timeout=0.3, poll=0.01,
                        on_result=results.append)(
            grid, Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    return results[0], grid


def kill_at(push, node_index, restart_at=None):
    def hook(grid):
        if grid.pushes == push:
            grid.dead.add(grid.node_ids[node_index])
        if restart_at is not None and grid.pushes == restart_at:
            grid.restart(node_index)
    return hook


def test_a_dead_client_is_left_out_and_the_run_still_collects(fed):
    # pushes: setup, init, initial evaluation, then train/evaluate per round; client 1
    # dies at round 2's train
    result, _ = run_dying(fed, kill_at(5, 1))
    assert result.state.round == ROUNDS
    phases = [(f["phase"], f["clients"]) for f in result.failures]
    assert phases[0] == ("train", [1]) and "no reply" in result.failures[0]["reasons"][0]
    assert ("collect", [1]) in phases and all(c == [1] for _, c in phases)
    # after it is gone it is not sent to again: recorded as gone, not timed out again
    assert sum("no reply" in f["reasons"][0] for f in result.failures) == 1
    for name in ("personalized", "local"):
        for v in result.state.models[name].values():
            assert torch.isnan(v[1]).all() and torch.isfinite(v[[0, 2]]).all()
    assert all(torch.isfinite(v).all() for v in result.state.models["global"].values())


def test_a_restarted_client_rejoins_with_the_servers_copy_of_its_rows(fed):
    result, grid = run_dying(fed, kill_at(5, 1, restart_at=7))
    rejoin = [f for f in result.failures if f["phase"] == "rejoin"]
    assert [f["clients"] for f in rejoin] == [[1]]
    assert f"node {grid.node_ids[-1]} serves client 1" in rejoin[0]["reasons"][0]
    assert "as of round 0" in rejoin[0]["reasons"][0]           # no checkpoint: initial rows
    assert not [f for f in result.failures if f["phase"] == "collect"]
    for v in result.state.models["personalized"].values():
        assert torch.isfinite(v).all()
    # the new node trained after rejoining: its context holds rows of this run
    assert "pflt.kept" in grid.contexts[grid.node_ids[-1]].state
    last_left = max(f["round"] for f in result.failures if f["phase"] == "train")
    assert last_left < rejoin[0]["round"] + 1 < ROUNDS


def test_sort_replies_charges_errors_and_silence_to_clients():
    class Grid(exchange.PollingGrid):
        def __init__(self):
            self.destination = {"a": 10, "b": 11, "c": 12}
    grid = Grid()
    with _task_identity():
        replies = _replies()
    out = exchange.sort_replies(grid, replies, [0, 1, 2, 3], {10: 0, 11: 1, 12: 2, 13: 3},
                                timeout=7)
    assert sorted(out.ok) == [0]
    assert out.failed == {1: "boom", 2: "no heartbeat", 3: "no reply within the timeout (7 s)"}
    assert out.gone == {2, 3}                    # an error reply means the node is alive


def _replies():
    """Replies to messages a, b, c: a reply, a ClientApp error, 'node unavailable'."""
    ok = Message(RecordDict(), dst_node_id=10, message_type="train")
    ok.metadata.__dict__["_reply_to_message_id"] = "a"
    err = Message(RecordDict(), dst_node_id=11, message_type="train")
    err = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason="boom"), reply_to=err)
    err.metadata.__dict__["_reply_to_message_id"] = "b"
    gone = Message(RecordDict(), dst_node_id=12, message_type="train")
    gone = Message(Error(code=ErrorCode.NODE_UNAVAILABLE, reason="no heartbeat"), reply_to=gone)
    gone.metadata.__dict__["_reply_to_message_id"] = "c"
    return [ok, err, gone]


def test_waiting_stops_when_aborted():
    class Empty(InProcessGrid):
        def get_node_ids(self):
            return []
    abort = threading.Event()
    threading.Timer(0.2, abort.set).start()
    t = time.monotonic()
    with pytest.raises(exchange.Aborted):
        exchange.wait_for_nodes(Empty(None, 0), 2, wait_seconds=60, abort=abort)
    assert time.monotonic() - t < 5


def test_ray_failure_ends_the_server_thread_and_says_why(fed, monkeypatch):
    """As when Ray's node times out: the engine raises while the ServerApp thread waits
    for nodes that never come; before, that thread kept the process alive for an hour."""
    threads = []

    def failing_run_simulation(server_app, client_app, num_supernodes, backend_config):
        grid = InProcessGrid(client_app, 0)           # no node ever connects
        ctx = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
        th = threading.Thread(target=lambda: pytest.raises(Exception, server_app, grid, ctx))
        th.start()
        threads.append(th)
        try:
            raise Exception("The current node timed out during startup.")
        except Exception as cause:
            raise RuntimeError("An error was encountered. Ending simulation.") from cause

    import flwr.simulation
    monkeypatch.setattr(flwr.simulation, "run_simulation", failing_run_simulation)
    settings = Settings.of(get_algorithm("pfedme")(**HPS), num_clients=N, seed=SEED)
    with pytest.raises(RaySimulationError, match="current node timed out during startup"):
        simulate(settings, fed, rounds=1, backend="ray")
    threads[0].join(timeout=5)
    assert not threads[0].is_alive()


def test_server_app_writes_outcome_when_it_fails_and_when_it_completes(fed, tmp_path):
    out = tmp_path / "out"
    ctx = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(),
                  run_config={"algorithm": "no-such-algorithm", "num-clients": N, "rounds": 1,
                              "out-dir": str(out)})
    with pytest.raises(Exception):
        app_main(InProcessGrid(None, 0), ctx)
    outcome = json.loads((out / "outcome.json").read_text())
    assert outcome["status"] == "failed" and "no-such-algorithm" in outcome["error"]
