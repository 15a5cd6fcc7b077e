"""The Flower server side: :class:`PFLStrategy` (a ``flwr.serverapp.strategy.Strategy``) and
:func:`make_server_app`.

The strategy holds the engine ``State`` of the *server* (global/shared/context models and
state tensors; per-client models stay on the clients) and runs round ``t`` as the batched
engine does (:mod:`algorithms.flower.splits`):

1. ``setup`` (before ``start``): waits for the ``N`` client nodes, sends them the run
   settings (``query.setup``), learns each node's client index and train count, builds a
   data-free federation of counts and the model, calls the algorithm's own ``init`` and
   sends each client its rows of the per-client models (``query.init``);
2. ``configure_train``: draws the engine's mini-batch indices and client sample from the
   round generator (Flower's own node sampling is not used) and sends each training client
   the server models (one ``ArrayRecord``; CGPFL's K context models travel in it with
   their ``[K, ...]`` dimension), its rows of per-client state tensors (e.g. its context
   label) and its ``[R, B]`` indices;
3. ``aggregate_train``: stacks the uploads in ascending client order and applies the
   engine's aggregation (``split.server_update``);
4. ``configure_evaluate`` / ``aggregate_evaluate`` (every ``eval_every`` rounds and after
   the last): clients evaluate each model the algorithm reports on their test split; the
   server forms ``<name>_accuracy`` (sample-weighted, = total correct / total samples, as
   the engine's runner), ``<name>_accuracy_mean`` (mean over clients) and ``<name>_loss``;
5. ``collect``: gathers the per-client models into the full engine ``State``.

Any client error stops the run (a missing upload would change the aggregate).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from logging import INFO
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from algorithms.base import State
from algorithms.flower.client import INFO as INFO_KEY, KEPT, MODELS, ROUND, ROWS, SETTINGS, UPLOAD
from algorithms.flower.records import Settings, pack, row, stack_rows, tensors_record, unpack
from algorithms.flower.splits import counts_federation, get_split
from pfl_theory.validation import positive, positive_int

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class PFLStrategy(Strategy):
    """Runs a registered algorithm's rounds over a Flower ``Grid`` (see the module doc)."""

    def __init__(self, settings: Settings, *, num_rounds: int, eval_every: int = 1,
                 device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0):
        self.settings = settings
        self.num_rounds = positive_int("num_rounds", num_rounds)
        self.eval_every = positive_int("eval_every", eval_every)
        self.timeout = positive("timeout", timeout)
        self.wait_seconds = positive("wait_seconds", wait_seconds)
        self.device = torch.device(device)
        self.algorithm = settings.build_algorithm()
        self.split = get_split(settings.algorithm)
        self.history: list[dict[str, Any]] = []
        self.state: State | None = None
        self._evaluating = False
        self.node_of: dict[int, int] = {}

    # ---- setup / collect (outside Strategy.start) -------------------------------------------
    def setup(self, grid: Grid) -> ArrayRecord:
        """Handshake with the ``N`` clients and initial state; returns the server models."""
        n = self.settings.num_clients
        nodes = _wait_for_nodes(grid, n, self.wait_seconds)
        replies = self._ask(grid, nodes, "query.setup",
                            lambda i: RecordDict({SETTINGS: self.settings.to_record()}))
        info = {}
        for reply in replies:
            rec = dict(reply.content[INFO_KEY])
            if rec["client"] in info:
                raise ValueError(f"two nodes claim client index {rec['client']}")
            info[int(rec["client"])] = rec
            self.node_of[int(rec["client"])] = reply.metadata.src_node_id
        if sorted(info) != list(range(n)):
            raise ValueError(f"client indices {sorted(info)} do not cover 0..{n - 1}")
        for key in ("feature_shape", "num_classes", "dtype"):
            values = {str(r[key]) for r in info.values()}
            if len(values) != 1:
                raise ValueError(f"clients disagree on {key}: {sorted(values)} (give every "
                                 f"client the same {key})")
        first = info[0]
        self.federation = counts_federation(
            [info[i]["train_count"] for i in range(n)], feature_shape=tuple(first["feature_shape"]),
            num_classes=first["num_classes"], dtype=DTYPES[first["dtype"]], device=self.device)
        self.model = self.settings.build_model(self.federation)
        full = self.algorithm.init(self.federation, self.model, self.settings.seed)
        self._ask(grid, [self.node_of[i] for i in range(n)], "query.init",
                  lambda i: RecordDict({KEPT: pack({m: row(full.models[m], i)
                                                    for m in self.split.client_models})}))
        self.state = self.split.server_state(full)
        return pack(self.state.models)

    def collect(self, grid: Grid) -> State:
        """The full engine state: server models and tensors + every client's models."""
        n = self.settings.num_clients
        replies = self._ask(grid, [self.node_of[i] for i in range(n)], "query.collect",
                            lambda i: RecordDict({}))
        kept = {int(r.content[INFO_KEY]["client"]): unpack(r.content[KEPT], device=self.device)
                for r in replies}
        models = dict(self.state.models)
        for m in self.split.client_models:
            models[m] = stack_rows([kept[i][m] for i in range(n)])
        return self.state.replace(models=models)

    def _ask(self, grid: Grid, nodes: list[int], kind: str,
             content: Callable[[int], RecordDict]) -> list[Message]:
        index = {node: i for i, node in self.node_of.items()}
        messages = [Message(content(index.get(node, -1)), dst_node_id=node, message_type=kind)
                    for node in nodes]
        return _checked(grid.send_and_receive(messages, timeout=self.timeout), len(messages), kind)

    # ---- Strategy interface --------------------------------------------------------------------
    def _payload(self, i: int, extra: dict[str, torch.Tensor], upload: bool) -> RecordDict:
        rows = {k: v[i:i + 1] for k, v in self.state.tensors.items()
                if k in self.split.client_tensors}
        return RecordDict({MODELS: self._models_record, ROWS: tensors_record({**rows, **extra}),
                           ROUND: ConfigRecord({"round": self.state.round, "upload": upload})})

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if self.state is None:
            raise RuntimeError("call PFLStrategy.setup(grid) before start()")
        if self.state.round != server_round - 1:
            raise RuntimeError(f"server round {server_round} but state at round {self.state.round}")
        self.plan = self.split.draw(self.algorithm, self.state, self.federation)
        self._models_record = pack(self.state.models)
        upload = set(self.plan.upload.tolist())
        return [Message(self._payload(i, {"batches": self.plan.batches[:, i]}, i in upload),
                        dst_node_id=self.node_of[i], message_type=MessageType.TRAIN)
                for i in self.plan.train.tolist()]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = _checked(replies, self.plan.train.numel(), "train")
        ups = {int(r.content[INFO_KEY]["client"]): unpack(r.content[UPLOAD], device=self.device)
               for r in replies if UPLOAD in r.content}
        order = self.plan.upload.tolist()
        if sorted(ups) != order:
            raise RuntimeError(f"uploads from clients {sorted(ups)}, expected {order}")
        names = ups[order[0]].keys() if order else ()
        uploads = {m: stack_rows([ups[i][m] for i in order]) for m in names}
        self.state = self.split.server_update(self.algorithm, self.state, self.federation,
                                              self.model, self.plan, uploads)
        return pack(self.state.models), MetricRecord({"clients_trained": self.plan.train.numel(),
                                                      "clients_aggregated": len(order)})

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        self._evaluating = not (server_round % self.eval_every and server_round != self.num_rounds)
        if not self._evaluating:
            return []
        self._models_record = pack(self.state.models)
        return [Message(self._payload(i, {}, False), dst_node_id=self.node_of[i],
                        message_type=MessageType.EVALUATE)
                for i in range(self.settings.num_clients)]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        if not self._evaluating:
            return None
        replies = _checked(replies, self.settings.num_clients, "evaluate")
        ms = [dict(r.content["metrics"]) for r in replies]
        total = sum(m["num-examples"] for m in ms)
        entry: dict[str, Any] = {"round": self.state.round}
        for name in [k[:-len("_correct")] for k in ms[0] if k.endswith("_correct")]:
            entry[f"{name}_accuracy"] = sum(m[f"{name}_correct"] for m in ms) / total
            entry[f"{name}_accuracy_mean"] = sum(m[f"{name}_accuracy"] for m in ms) / len(ms)
            entry[f"{name}_loss"] = sum(m[f"{name}_loss_sum"] for m in ms) / total
        self.history.append(entry)
        return MetricRecord({k: v for k, v in entry.items()})

    def summary(self) -> None:
        log(INFO, "\t├── algorithm %s, N=%d clients, seed %d (pfl_theory engine rounds)",
            self.settings.algorithm, self.settings.num_clients, self.settings.seed)
        log(INFO, "\t└── hyper-parameters %s", self.settings.hyperparameters)


def _wait_for_nodes(grid: Grid, n: int, wait_seconds: float) -> list[int]:
    end = time.monotonic() + wait_seconds
    while len(nodes := list(grid.get_node_ids())) < n:
        if time.monotonic() > end:
            raise TimeoutError(f"only {len(nodes)} of {n} client nodes connected within "
                               f"{wait_seconds} s")
        time.sleep(0.1)
    if len(nodes) > n:
        raise ValueError(f"{len(nodes)} client nodes connected, expected num_clients={n}")
    return nodes


def _checked(replies: Iterable[Message], expected: int, kind: str) -> list[Message]:
    replies = list(replies)
    errors = [r.error.reason for r in replies if r.has_error()]
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed in {kind}: {errors[0]}")
    if len(replies) != expected:
        raise RuntimeError(f"{kind}: {len(replies)} replies, expected {expected} (timeout?)")
    return replies


@dataclass
class FlowerResult:
    """Outcome of a Flower run: the full engine ``state`` (comparable with the in-process
    engine's), the evaluation ``history`` and Flower's own ``Result``."""

    state: State
    history: list[dict[str, Any]] = field(default_factory=list)
    flower: Result | None = None


def run_server(grid: Grid, runs: Sequence[Settings], *, rounds: int, eval_every: int = 1,
               device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0
               ) -> Iterator[FlowerResult]:
    """The ServerApp body: each of ``runs`` in turn on the connected client nodes (setup,
    ``Strategy.start`` for ``rounds`` rounds, collect); yields a :class:`FlowerResult` per run."""
    for settings in runs:
        strategy = PFLStrategy(settings, num_rounds=rounds, eval_every=eval_every, device=device,
                               timeout=timeout, wait_seconds=wait_seconds)
        initial = strategy.setup(grid)
        flower = strategy.start(grid, initial, num_rounds=rounds, timeout=timeout)
        yield FlowerResult(strategy.collect(grid), strategy.history, flower)


def make_server_app(settings: Settings | Sequence[Settings], *, rounds: int, eval_every: int = 1,
                    device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0,
                    on_result: Callable[[FlowerResult], None] | None = None) -> ServerApp:
    """A ``ServerApp`` running ``rounds`` rounds of ``settings.algorithm``; ``on_result``
    receives the :class:`FlowerResult` (the app itself returns nothing to Flower).

    A sequence of settings runs one after the other on the same client nodes (each with
    its own setup; e.g. several algorithms or seeds in one deployment)."""
    runs = [settings] if isinstance(settings, Settings) else list(settings)
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        for result in run_server(grid, runs, rounds=rounds, eval_every=eval_every, device=device,
                                 timeout=timeout, wait_seconds=wait_seconds):
            if on_result is not None:
                on_result(result)

    return app
