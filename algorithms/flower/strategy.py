"""The Flower server side: :class:`PFLStrategy` (a ``flwr.serverapp.strategy.Strategy``) and
:func:`make_server_app`, generic over the algorithm contract (:mod:`algorithms.engine.contract`).

The strategy holds the *server* part of the engine ``State`` (server models and all state
tensors; the client-held rows — ``client_models`` and ``client_tensors`` — stay on the
clients) and runs round ``t`` as the engine does, with the algorithm's own functions:

1. ``setup`` (before ``start``): waits for the ``N`` client nodes, sends them the run
   settings (``query.setup``), learns each node's client index and train count, builds a
   data-free federation of counts and the model, computes the data-free initial state
   (``server_init`` where the algorithm has one, else ``init``) and sends each client its
   rows of the client-held state (``query.init``); an ``init_phase`` (IFCA's cluster
   estimate) runs as a first exchange.  A ``state`` given to the strategy (resume from a
   checkpoint) replaces the initial state;
2. ``configure_train``: ``alg.first_phase`` draws the engine's mini-batch indices and client
   sample from the round generator (Flower's own node sampling is not used); each
   participant gets the server models (one ``ArrayRecord``; CGPFL's K context models travel
   with their ``[K, ...]`` dimension), its row of the phase's payload (e.g. pFedHN's
   generated model, PPFE's π_i), its ``[R, B]`` local indices and the phase's ``info``;
3. ``aggregate_train``: stacks the uploads in ascending client order and applies
   ``alg.server_aggregate``; further phases of the round (Per-FedAvg's adaptation, the
   fine-tuning of FedAvg+FT/FedBABU, IFCA's re-estimate, L2SGD's averaging steps, PPFE's
   stage transition) are exchanged directly over the grid;
4. ``configure_evaluate`` / ``aggregate_evaluate`` (every ``eval_every`` rounds and after
   the last): clients evaluate each model the algorithm reports on their test split (with
   their rows of the server-held per-client entries, ``server_rows``); the server forms
   ``<name>_accuracy`` (sample-weighted, = total correct / total samples, as the engine's
   runner), ``<name>_accuracy_mean`` (mean over clients) and ``<name>_loss``;
5. ``collect``: gathers the client-held rows into the full engine ``State``.

Divergence: the engine's contract (:mod:`algorithms.engine.runner`, its functions
``guarded_round`` and ``evaluation_divergence``): the clients evaluate the initial state
at setup (the reference losses); a round whose server state is non-finite, whose server
step trips an internal NaN guard, or an evaluation whose loss is non-finite or exceeds
1e3 × max(initial loss, 1) stops the run — :func:`run_server` yields the collected state
and history so far with :attr:`FlowerResult.divergence` set (``pflt flower-sim`` exits 1
naming the round, the deployment's outcome is ``failed``).

Reliability (:mod:`algorithms.flower.exchange`): a client whose reply is an error or does
not arrive within ``timeout`` is left out of that phase (``Phase.only``: its upload is not
aggregated, its rows are not updated) and recorded in :attr:`PFLStrategy.failures`; the run
goes on.  A client with no reply, or whose node Flower reports unavailable, is *gone*: it
gets no more messages (each later exchange records it as failed) until a node answers the
handshake with its client index — the same node back, or a restarted SuperNode with the
same ``partition-id`` (it gets the client's rows from the server's last copy: the initial
state, or the last checkpoint; recorded as phase ``rejoin``).  ``collect`` leaves the rows
of a gone client NaN (phase ``collect``), so the final state is written in any case.  A phase without any upload
it needed leaves the server state unchanged for the rest of the round.  With
``checkpoint_every=k`` the full state (collected from the clients) is written to
``checkpoint`` every ``k`` rounds (:func:`algorithms.engine.checkpoint.save_checkpoint`); pass the
loaded state as ``state`` to resume.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from logging import INFO
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from algorithms.engine.base import State
from algorithms.engine.contract import Phase, participant_batches, sent_models, server_init
from algorithms.engine.runner import DivergenceError, History, evaluation_divergence, guarded_round
from algorithms.flower.client import (BATCHES, INFO as INFO_KEY, KEPT, MODELS, PAYLOAD, ROUND,
                                      ROWS, UPLOAD)
from algorithms.flower.exchange import PollingGrid, Rejoin, sort_replies, wait_for_nodes
from algorithms.flower.membership import Membership
from algorithms.flower.records import (Settings, counts_federation, pack, row, stack_rows,
                                       tensors_record, unpack)
from pfl_theory.validation import positive, positive_int

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class PFLStrategy(Membership, Strategy):
    """Runs a registered algorithm's rounds over a Flower ``Grid`` (see the module doc)."""

    def __init__(self, settings: Settings, *, num_rounds: int, eval_every: int = 1,
                 device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0,
                 state: State | None = None, checkpoint: str | Path | None = None,
                 checkpoint_every: int | None = None, poll: float = 0.05,
                 abort: threading.Event | None = None):
        self.settings = settings
        self.abort = abort
        self.poll = positive("poll", poll)
        self.num_rounds = positive_int("num_rounds", num_rounds)
        self.eval_every = positive_int("eval_every", eval_every)
        self.timeout = positive("timeout", timeout)
        self.wait_seconds = positive("wait_seconds", wait_seconds)
        if checkpoint_every is not None and (positive_int("checkpoint_every", checkpoint_every)
                                             and checkpoint is None):
            raise ValueError("checkpoint_every needs a checkpoint path")
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.device = torch.device(device)
        self.algorithm = settings.build_algorithm()
        self.history: list[dict[str, Any]] = []
        #: test losses at the start (round 0, or the resumed round): the divergence reference
        self.initial: dict[str, float] = {}
        self.failures: list[dict[str, Any]] = []
        self.resume = state
        self.state: State | None = None
        self._evaluating = False
        self.node_of: dict[int, int] = {}
        self.active: set[int] = set()          # clients that are sent messages (not gone)
        self.left_at: dict[int, int] = {}      # gone client -> round it left

    # ---- setup / collect (outside Strategy.start) -------------------------------------------
    def _client_part(self, state: State) -> dict:
        """The client-held entries of ``state`` (client models and client tensors)."""
        alg = self.algorithm
        return {**{k: v for k, v in state.models.items() if alg.is_client_model(k)},
                **{k: v for k, v in state.tensors.items() if k in alg.client_tensors}}

    def setup(self, grid: Grid) -> ArrayRecord:
        """Handshake with the ``N`` clients and initial state; returns the server models."""
        grid = self.grid = grid if isinstance(grid, PollingGrid) else \
            PollingGrid(grid, self.poll, self.abort)
        n = self.settings.num_clients
        nodes = wait_for_nodes(grid, n, self.wait_seconds, self.abort)
        msgs = [Message(self._handshake(), dst_node_id=node, message_type="query.setup")
                for node in nodes]
        replies = grid.receive(set(grid.push_messages(msgs)), self.timeout,
                               enough=lambda rs: _covers(rs, n))
        info = {}
        for reply in replies:
            if reply.has_error():
                continue                  # a node that is listed but gone (or not ours)
            rec = dict(reply.content[INFO_KEY])
            if rec["client"] in info:
                raise ValueError(f"two nodes claim client index {rec['client']}")
            info[int(rec["client"])] = rec
            self.node_of[int(rec["client"])] = grid.node_of_reply(reply)
        if sorted(info) != list(range(n)):
            raise ValueError(f"client indices {sorted(info)} do not cover 0..{n - 1} (each "
                             f"SuperNode needs a distinct partition-id in 0..{n - 1})")
        self.active = set(range(n))
        self.rejoin = Rejoin(grid, self._handshake)
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
        full = self.resume if self.resume is not None else server_init(
            self.algorithm, self.federation, self.model, self.settings.seed)
        full = full.replace(models={k: {p: v.to(self.device) for p, v in m.items()}
                                    for k, m in full.models.items()},
                            tensors={k: v.to(self.device) for k, v in full.tensors.items()})
        kept = self._client_part(full)
        # what a restarted client gets back: client -> (round, its rows)
        self.rows_copy = {i: (full.round, {k: row(v, i) for k, v in kept.items()})
                          for i in range(n)}
        self._ask(grid, [self.node_of[i] for i in range(n)], "query.init",
                  lambda i: RecordDict({KEPT: pack({k: row(v, i) for k, v in kept.items()})}))
        self.state = full.replace(
            models={k: v for k, v in full.models.items() if k not in kept},
            tensors={k: v for k, v in full.tensors.items() if k not in kept})
        if self.resume is None and hasattr(self.algorithm, "init_phase"):
            self._run_phases(self.algorithm.init_phase(self.state, self.federation, self.model))
        self.initial = self._initial_evaluation()
        return pack(self._server_models())

    def _initial_evaluation(self) -> dict[str, float]:
        """Accuracy and loss of every evaluated model at the start, from the clients: the
        reference of the divergence contract (:func:`algorithms.engine.runner.divergence`;
        a resumed run's reference is its resumed state)."""
        replies = self.grid.send_and_receive(self._evaluate_messages(), timeout=self.timeout)
        entry = self._evaluation_entry(replies, "initial evaluation") or {}
        return {k: v for k, v in entry.items()
                if k.endswith(("_accuracy", "_loss")) and not k.endswith("_train_loss")}

    def _diverge(self, round_: int, model: str | None, reason: str | None):
        """Stop the run by the engine's divergence contract (caught by :func:`run_server`)."""
        raise DivergenceError(round_, History({}, list(self.history), dict(self.initial)),
                              model=model, reason=reason)

    # ---- phases ----------------------------------------------------------------------------------
    def _server_models(self) -> dict:
        return {k: v for k, v in self.state.models.items()
                if k not in self.algorithm.server_rows}

    def _phase_messages(self, phase: Phase) -> list[Message]:
        models = pack(sent_models(self.algorithm, self.state, phase))
        offsets = self.federation.train.offsets.cpu()
        uploaders = set(phase.upload_clients().tolist())
        info = json.dumps(phase.info)
        n = self.federation.num_clients
        own = {k: participant_batches(b, phase.clients, n) for k, b in phase.batches.items()}
        messages = []
        for j, i in enumerate(phase.clients.tolist()):
            if i not in self.active:
                continue                                  # gone: recorded in _aggregate
            payload = {k: row(v, j) for k, v in phase.payload.items()}
            batches = {k: b[:, j].cpu() - offsets[i] for k, b in own.items()}
            meta = {"round": self.state.round, "phase": phase.name, "info": info,
                    "upload": i in uploaders}
            messages.append(Message(
                RecordDict({MODELS: models, PAYLOAD: pack(payload),
                            BATCHES: tensors_record(batches), ROUND: ConfigRecord(meta)}),
                dst_node_id=self.node_of[i], message_type=MessageType.TRAIN))
        return messages

    def _aggregate(self, phase: Phase, replies: Iterable[Message]) -> Phase | None:
        """Server step of ``phase`` on the replies that arrived; the next phase (or None)."""
        asked = [i for i in phase.clients.tolist() if i in self.active]
        out = sort_replies(self.grid, replies, asked, self._client_of_node(), self.timeout)
        self._drop(out.gone)
        ok = out.ok
        self._answered = len(ok)
        missing = [i for i in phase.clients.tolist() if i not in ok]
        if missing:
            self._record(phase.name, missing, out)
            wanted = phase.upload_clients().numel()
            phase = phase.only(sorted(ok))
            if wanted and not phase.upload_clients().numel():
                return None
        order = phase.upload_clients().tolist()
        ups = [unpack(ok[i].content[UPLOAD], device=self.device) for i in order]
        uploads = {name: stack_rows([u[name] for u in ups]) for name in (ups[0] if ups else {})}
        self.state, nxt = self.algorithm.server_aggregate(phase, self.state, uploads,
                                                          self.federation, self.model)
        return nxt

    def _run_phases(self, phase: Phase | None) -> None:
        while phase is not None:
            replies = self.grid.send_and_receive(self._phase_messages(phase), timeout=self.timeout)
            phase = self._aggregate(phase, replies)

    # ---- Strategy interface --------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if self.state is None:
            raise RuntimeError("call PFLStrategy.setup(grid) before start()")
        if self.state.round != self.first_round + server_round - 1:
            raise RuntimeError(f"server round {server_round} but state at round {self.state.round}")
        self._admit()
        self.phase = self.algorithm.first_phase(self.state, self.federation, self.model)
        return self._phase_messages(self.phase)

    @property
    def first_round(self) -> int:
        return self.resume.round if self.resume is not None else 0

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        failed = len(self.failures)
        before = self.state
        trained = 0                 # clients whose reply to the first phase arrived

        def step() -> State:
            nonlocal trained
            nxt = self._aggregate(self.phase, replies)
            trained = self._answered
            self._run_phases(nxt)
            return self.state.replace(round=self.state.round + 1)

        self.state = guarded_round(step, before, self.federation.dtype, self._diverge)
        if self.checkpoint_every and (self.state.round % self.checkpoint_every == 0
                                      or server_round == self.num_rounds):
            from algorithms.engine.checkpoint import save_checkpoint
            save_checkpoint(self.checkpoint, self.collect(self.grid), self.algorithm)
        return pack(self._server_models()), MetricRecord(
            {"clients_trained": trained,
             "failures": len(self.failures) - failed})

    def _eval_content(self, i: int) -> RecordDict:
        rows = self.algorithm.server_rows
        models = {k: row(v, i, rows[k]) if k in rows else v for k, v in self.state.models.items()}
        tensors = {k: row(v, i, rows[k]) for k, v in self.state.tensors.items() if k in rows}
        return RecordDict({MODELS: pack(models), ROWS: tensors_record(tensors),
                           ROUND: ConfigRecord({"round": self.state.round})})

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        t = self.first_round + server_round       # the absolute round just finished
        self._evaluating = not (t % self.eval_every and server_round != self.num_rounds)
        if not self._evaluating:
            return []
        return self._evaluate_messages()

    def _evaluate_messages(self) -> list[Message]:
        return [Message(self._eval_content(i), dst_node_id=self.node_of[i],
                        message_type=MessageType.EVALUATE)
                for i in sorted(self.active)]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        if not self._evaluating:
            return None
        entry = self._evaluation_entry(replies, "evaluate")
        if entry is None:
            return None
        self.history.append(entry)
        evaluation_divergence(entry, History({}, self.history, self.initial), self._diverge)
        return MetricRecord({k: v for k, v in entry.items()})

    def _evaluation_entry(self, replies: Iterable[Message], phase: str
                          ) -> dict[str, Any] | None:
        """The evaluation entry of the clients' replies (None: no client answered)."""
        out = sort_replies(self.grid, replies, sorted(self.active), self._client_of_node(),
                           self.timeout)
        self._drop(out.gone)
        ms = [dict(out.ok[i].content["metrics"]) for i in sorted(out.ok)]
        if missing := [i for i in range(self.settings.num_clients) if i not in out.ok]:
            self._record(phase, missing, out)
        if not ms:
            return None
        total = sum(m["num-examples"] for m in ms)
        entry: dict[str, Any] = {"round": self.state.round}
        for name in [k[:-len("_correct")] for k in ms[0] if k.endswith("_correct")]:
            entry[f"{name}_accuracy"] = sum(m[f"{name}_correct"] for m in ms) / total
            entry[f"{name}_accuracy_mean"] = sum(m[f"{name}_accuracy"] for m in ms) / len(ms)
            entry[f"{name}_loss"] = sum(m[f"{name}_loss_sum"] for m in ms) / total
        return entry

    def summary(self) -> None:
        log(INFO, "\t├── algorithm %s, N=%d clients, seed %d (pfl_theory engine rounds)",
            self.settings.algorithm, self.settings.num_clients, self.settings.seed)
        log(INFO, "\t└── hyper-parameters %s", self.settings.hyperparameters)


def _covers(replies: list[Message], n: int) -> bool:
    """Whether the handshake replies name every client index 0 … n−1."""
    seen = {int(r.content[INFO_KEY]["client"]) for r in replies if not r.has_error()}
    return seen >= set(range(n))


@dataclass
class FlowerResult:
    """Outcome of a Flower run: the full engine ``state`` (comparable with the in-process
    engine's), the evaluation ``history``, the clients left out (``failures``: round, phase,
    clients, reasons), Flower's own ``Result`` and, for a run stopped by the divergence
    contract, the ``divergence``."""

    state: State
    history: list[dict[str, Any]] = field(default_factory=list)
    flower: Result | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: the run stopped by the divergence contract (:class:`~algorithms.engine.runner.
    #: DivergenceError`: round, model, reason); None for a run that went to its end
    divergence: DivergenceError | None = None


def run_server(grid: Grid, runs: Sequence[Settings], *, rounds: int, eval_every: int = 1,
               device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0,
               state: State | None = None, checkpoint: str | Path | None = None,
               checkpoint_every: int | None = None, poll: float = 0.05,
               abort: threading.Event | None = None) -> Iterator[FlowerResult]:
    """The ServerApp body: each of ``runs`` in turn on the connected client nodes (setup,
    ``Strategy.start`` until round ``rounds``, collect); yields a :class:`FlowerResult` per
    run.  ``state`` (a checkpoint's full state) resumes from its round.  ``poll``: seconds
    between two looks for replies (:class:`~algorithms.flower.exchange.PollingGrid`);
    ``abort`` (set by the runtime around it): stop waiting and raise."""
    start = state.round if state is not None else 0
    if rounds <= start:
        raise ValueError(f"rounds={rounds} but the resumed state is already at round {start}")
    for settings in runs:
        strategy = PFLStrategy(settings, num_rounds=rounds - start, eval_every=eval_every,
                               device=device, timeout=timeout, wait_seconds=wait_seconds,
                               state=state, checkpoint=checkpoint,
                               checkpoint_every=checkpoint_every, poll=poll, abort=abort)
        initial = strategy.setup(grid)
        try:
            flower = strategy.start(strategy.grid, initial, num_rounds=rounds - start,
                                    timeout=timeout)
        except DivergenceError as exc:    # the engine's contract: stop, keep what was done
            yield FlowerResult(strategy.collect(strategy.grid), strategy.history, None,
                               strategy.failures, divergence=exc)
            continue
        yield FlowerResult(strategy.collect(strategy.grid), strategy.history, flower,
                           strategy.failures)


def make_server_app(settings: Settings | Sequence[Settings], *, rounds: int, eval_every: int = 1,
                    device: str = "cpu", timeout: float = 3600.0, wait_seconds: float = 120.0,
                    on_result: Callable[[FlowerResult], None] | None = None,
                    state: State | None = None, checkpoint: str | Path | None = None,
                    checkpoint_every: int | None = None, poll: float = 0.05,
                    abort: threading.Event | None = None) -> ServerApp:
    """A ``ServerApp`` running ``settings.algorithm`` until round ``rounds``; ``on_result``
    receives the :class:`FlowerResult` (the app itself returns nothing to Flower).

    A sequence of settings runs one after the other on the same client nodes (each with
    its own setup; e.g. several algorithms or seeds in one deployment).  ``state``,
    ``checkpoint``, ``checkpoint_every``: resume / checkpoint (see :class:`PFLStrategy`)."""
    runs = [settings] if isinstance(settings, Settings) else list(settings)
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        for result in run_server(grid, runs, rounds=rounds, eval_every=eval_every, device=device,
                                 timeout=timeout, wait_seconds=wait_seconds, state=state,
                                 checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                                 poll=poll, abort=abort):
            if on_result is not None:
                on_result(result)

    return app
