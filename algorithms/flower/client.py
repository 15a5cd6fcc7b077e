"""The Flower ``ClientApp``: one client of any registered algorithm, running the algorithm's
own ``client_update`` (:mod:`algorithms.engine.contract`) with N = 1 on the client's data.

Message handlers (message types sent by :class:`algorithms.flower.strategy.PFLStrategy`):

* ``query.setup`` — receives the run :class:`~algorithms.flower.records.Settings`, stores
  them in ``context.state``; replies with the client index, train/test sample counts,
  feature shape, number of classes and dtype of its data, and whether the node holds
  client rows of this run already (``kept``: a client coming back after a timeout);
* ``query.init`` — stores the client's rows of the client-held state (``client_models``,
  ``client_tensors``: e.g. pFedMe's ``personalized``/``local``, FedRep's head, APFL's α_i)
  in ``context.state``;
* ``train`` — one phase of a round (its name and ``info`` in the message): builds the
  client's :class:`~algorithms.engine.contract.ClientView` (server models, the server's payload row
  for this client, its own kept rows, its mini-batches from the local indices it was sent,
  its train split), runs ``alg.client_update``, keeps the new rows and replies with the
  upload when asked;
* ``evaluate`` — evaluates every model the algorithm reports (``alg.evaluated`` of the
  one-client state) on the client's test split; replies with correct counts / loss sums;
* ``query.collect`` — replies with the kept rows (to assemble the full state).

``load_data(context) -> (client_index, federation)`` supplies the client's one-client
:class:`~synthetic.federation.Federation` (train split in the engine's order, so that the
engine's client-local indices pick the same samples); it is called once per node and
cached for the process.
"""

from __future__ import annotations

import json
from typing import Callable

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from algorithms.engine.base import State
from algorithms.engine.contract import ClientView, Phase
from algorithms.engine.evaluation import evaluate, evaluated_models, model_for
from algorithms.flower.records import Settings, pack, tensors_from, unpack
from synthetic.federation import Federation

SETTINGS, KEPT = "pflt.settings", "pflt.kept"           # context.state keys
MODELS, ROWS, ROUND, INFO, UPLOAD = "pflt.models", "pflt.rows", "pflt.round", "pflt.info", "pflt.upload"
PAYLOAD, BATCHES = "pflt.payload", "pflt.batches"

LoadData = Callable[[Context], "tuple[int, Federation]"]


def client_batch(fed: Federation, local_index: torch.Tensor):
    """``(x [R, 1, B, ...], y)`` of a one-client federation for local indices ``[R, B]``."""
    idx = local_index.to(fed.device)[:, None, :] + fed.train.offsets[0]
    return fed.train.gather(idx)


def split_kept(kept: dict) -> tuple[dict, dict]:
    """(parameter dicts, plain tensors) of a client's kept rows."""
    return ({k: v for k, v in kept.items() if isinstance(v, dict)},
            {k: v for k, v in kept.items() if isinstance(v, torch.Tensor)})


def make_client_app(load_data: LoadData, *, threads: int | None = 1,
                    fail: Callable[[int, int, str], bool] | None = None) -> ClientApp:
    """A ``ClientApp`` serving any registered algorithm (chosen by the server's settings).

    ``threads``: ``torch.set_num_threads`` in the handlers (None: leave torch's default).
    ``fail(client, round, phase) -> bool`` (tests): raise in that client's ``train`` handler,
    to exercise the server's handling of a failed client."""
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
            cache[key] = (settings, settings.build_algorithm(), settings.build_model(fed))
        return (settings, index, fed, *cache[key][1:])

    def kept_state(msg: Message, context: Context, fed: Federation, settings: Settings) -> State:
        """The one-client state: server models and rows as sent, plus the kept rows."""
        models, tensors = split_kept(unpack(context.state[KEPT], device=fed.device))
        models.update(unpack(msg.content[MODELS], device=fed.device))
        tensors.update(tensors_from(msg.content[ROWS], device=fed.device))
        return State(int(msg.content[ROUND]["round"]), settings.seed, models, tensors)

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
                "dtype": str(fed.dtype).removeprefix("torch."),
                "kept": KEPT in context.state}
        return Message(RecordDict({INFO: ConfigRecord(info)}), reply_to=msg)

    @app.query("init")
    def init(msg: Message, context: Context) -> Message:
        context.state[KEPT] = pack(unpack(msg.content[KEPT]))
        index, _ = data(context)
        return Message(RecordDict({INFO: ConfigRecord({"client": index})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        limit_threads()
        settings, index, fed, alg, model = setup_of(context)
        meta = msg.content[ROUND]
        t, name = int(meta["round"]), str(meta["phase"])
        if fail is not None and fail(index, t, name):
            raise RuntimeError(f"client {index}: injected failure in round {t}, phase {name}")
        kept = unpack(context.state[KEPT], device=fed.device)
        models, tensors = split_kept(kept)
        me = torch.tensor([index])
        phase = Phase(name, me, info=json.loads(str(meta["info"])))
        batches = {k: client_batch(fed, v) for k, v in tensors_from(msg.content[BATCHES]).items()}
        view = ClientView(t, settings.seed, settings.num_clients, fed.num_classes, me,
                          unpack(msg.content[MODELS], device=fed.device),
                          unpack(msg.content[PAYLOAD], device=fed.device),
                          models, tensors, batches, fed.train, fed.test)
        rows, upload = alg.client_update(phase, model, view)
        context.state[KEPT] = pack({**kept, **rows})
        content = RecordDict({INFO: ConfigRecord({"client": index}),
                              "metrics": MetricRecord({"num-examples": int(fed.train.counts[0])})})
        if bool(meta["upload"]):
            content[UPLOAD] = pack(upload)
        return Message(content, reply_to=msg)

    @app.evaluate()
    def evaluate_(msg: Message, context: Context) -> Message:
        limit_threads()
        settings, index, fed, alg, model = setup_of(context)
        state = kept_state(msg, context, fed, settings)
        n = int(fed.test.counts[0])
        metrics: dict = {"num-examples": n}
        for name, params in evaluated_models(alg, state).items():
            acc, loss = evaluate(model_for(alg, model), params, fed.test)
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
