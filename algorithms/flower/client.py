"""The Flower ``ClientApp``: one client of a registered algorithm, running the engine's own
local update with N = 1 on the client's data (see :mod:`algorithms.flower.splits`).

Message handlers (message types sent by :class:`algorithms.flower.strategy.PFLStrategy`):

* ``query.setup`` — receives the run :class:`~algorithms.flower.records.Settings`, stores
  them in ``context.state``; replies with the client index, train/test sample counts,
  feature shape, number of classes and dtype of its data;
* ``query.init`` — stores the client's initial rows of the per-client models (e.g.
  pFedMe's ``personalized``/``local``, FedRep's head) in ``context.state``;
* ``train`` — runs the algorithm's local update on the mini-batch indices it was sent,
  keeps its per-client models in ``context.state`` and uploads what the server aggregates;
* ``evaluate`` — evaluates every model the algorithm reports (``alg.evaluated`` of the
  one-client state) on the client's test split; replies with correct counts / loss sums;
* ``query.collect`` — replies with the per-client models (to assemble the full state).

``load_data(context) -> (client_index, federation)`` supplies the client's one-client
:class:`~synthetic.federation.Federation` (train split in the engine's order, so that the
engine's client-local indices pick the same samples); it is called once per node and
cached for the process.
"""

from __future__ import annotations

from typing import Callable

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from algorithms.base import State
from algorithms.evaluation import evaluate
from algorithms.flower.records import Settings, pack, tensors_from, unpack
from algorithms.flower.splits import client_batch, get_split
from synthetic.federation import Federation

SETTINGS, KEPT = "pflt.settings", "pflt.kept"           # context.state keys
MODELS, ROWS, ROUND, INFO, UPLOAD = "pflt.models", "pflt.rows", "pflt.round", "pflt.info", "pflt.upload"

LoadData = Callable[[Context], "tuple[int, Federation]"]


def make_client_app(load_data: LoadData, *, threads: int | None = 1) -> ClientApp:
    """A ``ClientApp`` serving any supported algorithm (chosen by the server's settings).

    ``threads``: ``torch.set_num_threads`` in the handlers (None: leave torch's default)."""
    app = ClientApp()
    cache: dict = {}

    def data(context: Context) -> tuple[int, Federation]:
        key = (context.run_id, context.node_id)
        if key not in cache:
            index, fed = load_data(context)
            if fed.num_clients != 1:
                raise ValueError(f"load_data must return a one-client federation, got "
                                 f"{fed.num_clients} clients")
            cache[key] = (int(index), fed)
        return cache[key]

    def setup_of(context: Context):
        if SETTINGS not in context.state:
            raise RuntimeError("this client received a round before the 'query.setup' message")
        settings = Settings.from_record(context.state[SETTINGS])
        index, fed = data(context)
        key = (context.run_id, context.node_id, "model")
        if key not in cache or cache[key][0] != settings:    # a new run on the same nodes
            cache[key] = (settings, settings.build_algorithm(), get_split(settings.algorithm),
                          settings.build_model(fed))
        return (settings, index, fed, *cache[key][1:])

    def view(msg: Message, context: Context, fed: Federation, settings: Settings) -> State:
        models = unpack(msg.content[MODELS], device=fed.device)
        models.update(unpack(context.state[KEPT], device=fed.device))
        rows = tensors_from(msg.content[ROWS], device=fed.device)
        rows.pop("batches", None)
        return State(int(msg.content[ROUND]["round"]), settings.seed, models, rows)

    def limit_threads():
        if threads is not None:
            torch.set_num_threads(threads)

    @app.query("setup")
    def setup(msg: Message, context: Context) -> Message:
        limit_threads()
        settings = Settings.from_record(msg.content[SETTINGS])
        context.state[SETTINGS] = settings.to_record()
        index, fed = data(context)
        if not 0 <= index < settings.num_clients:
            raise ValueError(f"client index {index} outside 0..{settings.num_clients - 1}")
        info = {"client": index, "train_count": int(fed.train.counts[0]),
                "test_count": int(fed.test.counts[0]), "num_classes": fed.num_classes,
                "feature_shape": [int(s) for s in fed.feature_shape],
                "dtype": str(fed.dtype).removeprefix("torch.")}
        return Message(RecordDict({INFO: ConfigRecord(info)}), reply_to=msg)

    @app.query("init")
    def init(msg: Message, context: Context) -> Message:
        context.state[KEPT] = pack(unpack(msg.content[KEPT]))
        index, _ = data(context)
        return Message(RecordDict({INFO: ConfigRecord({"client": index})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        limit_threads()
        settings, index, fed, alg, split, model = setup_of(context)
        state = view(msg, context, fed, settings)
        batches = tensors_from(msg.content[ROWS])["batches"]
        x, y = client_batch(fed, batches)
        upload, kept = split.client_update(alg, model, state, x, y, settings.num_clients)
        old = unpack(context.state[KEPT])
        context.state[KEPT] = pack({**old, **kept})
        content = RecordDict({INFO: ConfigRecord({"client": index}),
                              "metrics": MetricRecord({"num-examples": int(fed.train.counts[0])})})
        if bool(msg.content[ROUND]["upload"]):
            content[UPLOAD] = pack(upload)
        return Message(content, reply_to=msg)

    @app.evaluate()
    def evaluate_(msg: Message, context: Context) -> Message:
        limit_threads()
        settings, index, fed, alg, split, model = setup_of(context)
        state = view(msg, context, fed, settings)
        n = int(fed.test.counts[0])
        metrics: dict = {"num-examples": n}
        for name, params in alg.evaluated(state).items():
            acc, loss = evaluate(model, params, fed.test)
            metrics[f"{name}_correct"] = float(acc[0]) * n
            metrics[f"{name}_accuracy"] = float(acc[0])
            metrics[f"{name}_loss_sum"] = float(loss[0]) * n
        return Message(RecordDict({INFO: ConfigRecord({"client": index}),
                                   "metrics": MetricRecord(metrics)}), reply_to=msg)

    @app.query("collect")
    def collect(msg: Message, context: Context) -> Message:
        index, _ = data(context)
        kept = context.state[KEPT] if KEPT in context.state else ArrayRecord()
        return Message(RecordDict({INFO: ConfigRecord({"client": index}), KEPT: kept}),
                       reply_to=msg)

    return app
