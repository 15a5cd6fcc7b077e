"""Running the Flower apps on one machine: Flower's simulation engine (Ray) or an in-process
grid, plus the client slices of an in-memory federation.

* :func:`~algorithms.engine.contract.client_federation` (re-exported) — client ``i`` of a
  :class:`~synthetic.federation.Federation` as a one-client federation (its train/test rows
  in the engine's order), what a real client gets from
  ``Federation.from_client_arrays([x_i], [y_i], seed=seed + i)``.
* :func:`simulate` — runs :func:`~algorithms.flower.strategy.make_server_app` and
  :func:`~algorithms.flower.client.make_client_app` with ``backend="ray"``
  (``flwr.simulation.run_simulation``: the ClientApps run in Ray worker processes, messages
  are serialised) or ``backend="inprocess"`` (:class:`InProcessGrid`: the same ServerApp and
  ClientApp objects and handlers, messages serialised through Flower's protobuf ``serde``
  and delivered by direct calls; starts in milliseconds — used by the fast tests).

Offline: :data:`OFFLINE_ENV` (no telemetry, no runtime dependency installation) is set
before Flower runs.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterable, Sequence
from uuid import uuid4

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from algorithms.engine.contract import client_federation  # noqa: F401  (re-exported)
from algorithms.flower.client import make_client_app
from algorithms.flower.records import Settings
from algorithms.flower.strategy import FlowerResult, make_server_app
from pfl_theory.validation import positive
from synthetic.federation import Federation

OFFLINE_ENV = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}


def set_offline_env() -> None:
    """Set :data:`OFFLINE_ENV` in ``os.environ`` (inherited by Ray workers)."""
    os.environ.update(OFFLINE_ENV)


class InProcessGrid(Grid):
    """A Flower ``Grid`` delivering each message to a ``ClientApp`` by a direct call, one
    persistent ``Context`` per node (``node_config``: ``partition-id``, ``num-partitions``).
    ``errors_as_replies``: a handler's exception becomes an error reply (as in Flower's
    runtimes) instead of propagating.
    Message contents cross a protobuf round trip both ways, as on the wire.  Uses two
    Flower internals as ``run_simulation`` does (message ids, the task identity): tied to
    the pinned ``flwr==1.41.0``."""

    def __init__(self, client_app: ClientApp, num_nodes: int, *, run_id: int = 0,
                 errors_as_replies: bool = False):
        from flwr.supercore.run import Run

        self.client_app = client_app
        self.errors_as_replies = errors_as_replies
        self.node_ids = [1000 + i for i in range(num_nodes)]
        self.contexts = {nid: Context(run_id=run_id, node_id=nid,
                                      node_config={"partition-id": i, "num-partitions": num_nodes},
                                      state=RecordDict(), run_config={})
                         for i, nid in enumerate(self.node_ids)}
        self._run = Run.create_empty(run_id=run_id)
        self._replies: dict[str, Message] = {}

    def set_run(self, run) -> None:
        self._run = run

    @property
    def run(self):
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content, dst_node_id=dst_node_id, message_type=message_type,
                       group_id=group_id, ttl=ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.node_ids)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            dst = msg.metadata.dst_node_id
            delivered = Message(_wire(msg.content), dst_node_id=dst,
                                message_type=msg.metadata.message_type)
            mid = str(uuid4())
            delivered.metadata.__dict__["_message_id"] = mid       # as Flower's InMemoryGrid
            try:
                reply = self.client_app(delivered, self.contexts[dst])
            except Exception as exc:   # as Flower's runtimes: an error reply, the run goes on
                if not self.errors_as_replies:
                    raise
                from flwr.app import Error
                reply = Message(error=Error(code=0, reason=f"{type(exc).__name__}: {exc}"),
                                reply_to=delivered)
            if not reply.has_error():
                reply = Message(_wire(reply.content), reply_to=delivered)
            self._replies[mid] = reply
            ids.append(mid)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(m) for m in list(message_ids) if m in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))


def _wire(content: RecordDict) -> RecordDict:
    from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
    return recorddict_from_proto(recorddict_to_proto(content))


@contextmanager
def _task_identity():
    """Flower's ``Message`` constructor reads the process's task identity, which
    ``run_simulation`` sets; set the same values (restored afterwards) for in-process runs."""
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 0, SUPERLINK_NODE_ID
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def simulate(settings: Settings, federation: Federation, *, rounds: int, eval_every: int = 1,
             backend: str = "inprocess", cpus_per_client: float = 1.0,
             threads: int | None = 1, **options) -> FlowerResult:
    """Run ``settings`` until round ``rounds`` under Flower, client ``i`` holding
    ``client_federation(federation, i)``; returns the server's :class:`FlowerResult`.

    ``threads``: ``torch.set_num_threads`` in the client handlers (in-process: this whole
    process).  ``options``: ``state`` / ``checkpoint`` / ``checkpoint_every`` (resume and
    checkpoints, see :class:`~algorithms.flower.strategy.PFLStrategy`), ``fail`` (tests: a
    predicate ``(client, round, phase)`` making that client's handler raise) and
    ``errors_as_replies`` (in-process: a client exception becomes an error reply — the
    client is left out of that phase, as under Flower's runtimes — instead of propagating;
    default: propagate)."""
    return simulate_many([settings], federation, rounds=rounds, eval_every=eval_every,
                         backend=backend, cpus_per_client=cpus_per_client, threads=threads,
                         **options)[0]


def simulate_many(runs: Sequence[Settings], federation: Federation, *, rounds: int,
                  eval_every: int = 1, backend: str = "inprocess", cpus_per_client: float = 1.0,
                  threads: int | None = 1, state=None, checkpoint=None, checkpoint_every=None,
                  fail=None, errors_as_replies: bool = False) -> list[FlowerResult]:
    """Several runs one after the other in ONE Flower simulation (one Ray start-up)."""
    runs = list(runs)
    if not runs:
        raise ValueError("no runs given")
    for settings in runs:
        if settings.num_clients != federation.num_clients:
            raise ValueError(f"settings.num_clients={settings.num_clients} but the federation "
                             f"has {federation.num_clients} clients")
    if backend not in ("inprocess", "ray"):
        raise ValueError(f"backend must be 'inprocess' or 'ray', got {backend!r}")
    positive("cpus_per_client", cpus_per_client)
    set_offline_env()
    cpu = federation.to(device="cpu")
    slices = [client_federation(cpu, i) for i in range(cpu.num_clients)]

    def load_data(context: Context):
        i = int(context.node_config["partition-id"])
        return i, slices[i]

    results: list[FlowerResult] = []
    abort = threading.Event()
    server = make_server_app(runs, rounds=rounds, eval_every=eval_every, on_result=results.append,
                             state=state, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, abort=abort)
    client = make_client_app(load_data, threads=threads, fail=fail)
    if backend == "ray":
        _run_ray(server, client, federation.num_clients, cpus_per_client, abort)
    else:
        with _task_identity():
            _run_server(server, InProcessGrid(client, federation.num_clients,
                                              errors_as_replies=errors_as_replies))
    if len(results) != len(runs):
        raise RuntimeError(f"the Flower {backend} simulation finished {len(results)} of "
                           f"{len(runs)} runs (see the log above)")
    return results


class RaySimulationError(RuntimeError):
    """Flower's Ray simulation engine failed (e.g. Ray's node did not start)."""


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(exc))
        exc = nxt
    return exc


def _run_ray(server: ServerApp, client: ClientApp, num_nodes: int, cpus: float,
             abort: threading.Event) -> None:
    """``run_simulation`` that ends: when the engine fails, ``abort`` stops the ServerApp's
    thread (else it would wait for replies that never come and the process would not
    exit), Ray is shut down and :class:`RaySimulationError` says why in one line."""
    from flwr.simulation import run_simulation
    try:
        run_simulation(server, client, num_supernodes=num_nodes,
                       backend_config={"client_resources": {"num_cpus": cpus, "num_gpus": 0.0}})
    except BaseException as exc:
        abort.set()
        root = _root_cause(exc)
        raise RaySimulationError(
            f"Flower's Ray simulation failed: {' '.join(str(root).split()) or type(root).__name__}"
            f" (Ray needs several GB of address space and free CPUs; --backend inprocess runs "
            f"the same apps without Ray)") from exc
    finally:
        abort.set()
        try:
            import ray
            if ray.is_initialized():
                ray.shutdown()
        except Exception:             # Ray half started: nothing more to clean here
            pass


def _run_server(server: ServerApp, grid: InProcessGrid) -> None:
    server(grid, Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}))
