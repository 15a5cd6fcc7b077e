"""The algorithm contract: a round is client updates and server aggregations, and the engine
derives ``round`` from them here, in one place.

An algorithm (a frozen dataclass deriving from :class:`Algorithm`) defines

* ``first_phase(state, fed, model) -> Phase`` — the server's draws for round
  ``t = state.round`` (mini-batch indices, sampled clients, per-client inputs it computes);
* ``client_update(phase, model, view) -> (client_state, upload)`` — what the clients of the
  phase do, over a leading client dimension (the batched engine calls it once for all
  participants; Flower and :func:`algorithms.reference_loop.client_by_client_round` call it
  with one client).  ``view`` is a :class:`ClientView`; ``client_state`` maps names in
  ``client_models`` / ``client_tensors`` to the participants' new rows (kept by the clients),
  ``upload`` maps names to what the server receives (``[P, ...]`` each);
* ``server_aggregate(phase, state, uploads, fed, model) -> (state, next_phase | None)`` —
  the server step on the stacked uploads of ``phase.uploaders`` (ascending client order).
  It returns the next phase of the same round (a second exchange: e.g. Per-FedAvg's
  adaptation of every client to the new global model, L2SGD's averaging steps) or ``None``.

``client_models`` (per-client parameter dicts ``[N, ...]``) and ``client_tensors`` (per-client
tensors ``[N, ...]``) live on the clients; everything else in the state lives on the server.
``server_rows`` names server-held entries with a client axis (``{name: axis}``), sliced for
a client's own view when it evaluates.  An algorithm whose initial state needs the clients'
data (IFCA's cluster estimate) defines ``server_init`` (the data-free part) and
``init_phase``; its ``init`` runs both through :func:`initial_state`.

Rules that keep the engine, the per-client loop and Flower equal: all randomness is drawn in
``first_phase`` / ``server_aggregate`` from ``state.generator(stream)``; ``server_aggregate``
reads only the server state, ``phase.clients``/``phase.uploaders``/``phase.info``/
``phase.plan`` and the uploads (not ``phase.payload``), so a phase with failed clients left
out (:meth:`Phase.only`) aggregates the rest.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch

from algorithms.engine.base import Params, State
from algorithms.engine.communication import METER

Tree = dict[str, "Params | torch.Tensor"]


@dataclass(frozen=True)
class Phase:
    """One client/server exchange of a round.

    ``clients``: participants (sorted, CPU long); ``uploaders``: those whose upload is
    aggregated (None: all participants); ``batches``: named mini-batch indices into
    ``fed.train``, either ``[R, N, B]`` for ALL clients (a participant uses the column of
    its id) or ``[R, P, B]`` for exactly the ``P`` participants (column ``j`` is
    ``clients[j]``; :func:`train_phase` draws these) — unambiguous, as ``P = N`` sorted
    participants are ``0 … N−1`` (see :func:`participant_batches`);
    ``payload``: per-participant inputs the server computed (leading dim = ``len(clients)``);
    ``info``: plain JSON values sent to the clients; ``send``: the server models the
    participants receive (None: all but ``server_rows``; e.g. pFedHN's clients get only
    their generated model, in the payload); ``plan``: server-side memory across the phases
    of the round (never sent)."""

    name: str
    clients: torch.Tensor
    batches: dict[str, torch.Tensor] = field(default_factory=dict)
    payload: Tree = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    uploaders: torch.Tensor | None = None
    send: tuple[str, ...] | None = None
    plan: Any = None

    def upload_clients(self) -> torch.Tensor:
        return self.clients if self.uploaders is None else self.uploaders

    def only(self, clients) -> "Phase":
        """This phase restricted to ``clients`` (failed participants left out)."""
        keep = torch.as_tensor(sorted(int(c) for c in clients), dtype=torch.long)
        mask = torch.isin(self.clients, keep)
        rows = mask.nonzero().flatten()
        payload = {k: _rows(v, rows) for k, v in self.payload.items()}
        # the participants' own columns are restricted with them; everyone's stay whole
        batches = {k: b[:, rows.to(b.device)] if b.shape[1] == self.clients.numel() else b
                   for k, b in self.batches.items()}
        up = None if self.uploaders is None else self.uploaders[torch.isin(self.uploaders, keep)]
        return dataclasses.replace(self, clients=self.clients[mask], payload=payload,
                                   uploaders=up, batches=batches)


@dataclass(frozen=True)
class ClientView:
    """What the participants of a phase see (leading dimension ``P`` = participants)."""

    round: int
    seed: int
    num_clients: int
    num_classes: int
    clients: torch.Tensor                           # global indices of the participants
    server: dict[str, Params]                       # server models (as broadcast)
    payload: Tree                                   # per-participant server inputs
    models: dict[str, Params]                       # own rows of the client models
    tensors: dict[str, torch.Tensor]                # own rows of the client tensors
    batches: dict[str, tuple[torch.Tensor, torch.Tensor]]   # (x [R, P, B, ...], y [R, P, B])
    #   (a pair of :class:`LazyRows` for an algorithm with ``lazy_batches``)
    train: Any = None                               # train split of exactly the participants
    test: Any = None                                # their test split (Per-FedAvg adapt_on="test")


class Algorithm:
    """Base of every registered algorithm: ``round`` derived from the contract."""

    client_models: tuple[str, ...] = ()
    client_tensors: tuple[str, ...] = ()
    server_rows: dict[str, int] = {}
    #: True: the engine hands ``client_update`` its batches as :class:`LazyRows` (gathered
    #: one local round at a time) instead of every round's ``[R, P, B, ...]`` at once
    lazy_batches: bool = False
    #: True: ``view.train`` is the participants' own train split in every phase (FedEM's
    #: E-step reads every local sample), not only when every client takes part
    needs_train: bool = False

    def is_client_model(self, name: str) -> bool:
        return name in self.client_models

    def checkpoint_reference(self, fed, model, seed: int, round_: int) -> State:
        """A state with the names, shapes and dtypes that this run's state has after round
        ``round_`` (what a checkpoint of it must hold: :func:`algorithms.engine.checkpoint.check_layout`).
        The initial state, for an algorithm whose state keeps its layout (a leading
        dimension other than N may change: contexts); PPFE's grows with its stages."""
        return self.init(fed, model, seed)

    def round(self, state: State, fed, model) -> State:
        """Communication round ``t = state.round`` → the state of round ``t + 1``."""
        return engine_round(self, state, fed, model)


# ---- the engine ----------------------------------------------------------------------

def engine_round(alg, state: State, fed, model) -> State:
    """Run every phase of round ``t`` batched over the participants; ``round = t + 1``."""
    return run_phases(alg, state, fed, model, alg.first_phase(state, fed, model)).replace(
        round=state.round + 1)


def run_phases(alg, state: State, fed, model, phase: Phase | None) -> State:
    meter = METER.get()
    while phase is not None:
        size = CLIENT_CHUNK.get()
        if size is not None and size < phase.clients.numel():
            kept, uploads = chunked_updates(alg, state, fed, model, phase, size, meter)
        else:
            view = engine_view(alg, state, fed, phase)
            if meter is not None:
                meter.sent(view.round, view.server, phase.payload, phase.clients.numel())
            kept, upload = alg.client_update(phase, model, view)
            if meter is not None:
                meter.received(view.round, upload)
            uploads = upload_rows(phase, upload)
        state = scatter_client_state(alg, state, phase.clients, kept)
        state, phase = alg.server_aggregate(phase, state, uploads, fed, model)
    return state


#: clients per chunk of a phase's client updates (None: all participants at once); set for
#: a run by :func:`client_chunks` (``pflt run --client-chunk`` / ``--memory-budget``)
CLIENT_CHUNK: ContextVar[int | None] = ContextVar("client_chunk", default=None)


@contextmanager
def client_chunks(size: int | None):
    """Within the block, every phase runs its participants' updates ``size`` clients at a
    time (:func:`chunked_updates`); ``None``: all at once."""
    if size is not None and (not isinstance(size, int) or size < 1):
        raise ValueError(f"client chunk must be a positive integer, got {size!r}")
    token = CLIENT_CHUNK.set(size)
    try:
        yield
    finally:
        CLIENT_CHUNK.reset(token)


def chunked_updates(alg, state: State, fed, model, phase: Phase, size: int, meter=None
                    ) -> tuple[Tree, Tree]:
    """``client_update`` on the participants ``size`` at a time (ascending order), each
    chunk seeing exactly its own rows (:meth:`Phase.only`, its own train and test
    splits — as :func:`algorithms.reference_loop.client_by_client_round` gives one
    client); the chunks' kept rows and uploads (of ``phase.uploaders``) written into
    tensors allocated once, so the peak memory of the client updates is one chunk's
    (plus the stacked results) instead of every participant's.  Clients are
    independent in ``client_update``, so the numbers are those of the unchunked call."""
    clients = phase.clients.tolist()
    kept_rows, upload_rows_ = _Stack(len(clients)), _Stack(phase.upload_clients().numel())
    for start in range(0, len(clients), size):
        mine = phase.only(clients[start:start + size])
        idx = mine.clients.to(fed.device)
        view = dataclasses.replace(engine_view(alg, state, fed, mine),
                                   train=participant_split(fed.train, idx),
                                   test=participant_split(fed.test, idx))
        if meter is not None:
            meter.sent(view.round, view.server, mine.payload, mine.clients.numel())
        kept, upload = alg.client_update(mine, model, view)
        if meter is not None:
            meter.received(view.round, upload)
        kept_rows.add(kept)
        upload_rows_.add(upload_rows(mine, upload))
    return kept_rows.tree, upload_rows_.tree


class _Stack:
    """Trees of ``[p, ...]`` rows appended chunk by chunk into ``[total, ...]`` tensors
    (allocated at the first chunk, so no list of chunks and no concatenation)."""

    def __init__(self, total: int):
        self.total, self.filled, self.tree = total, 0, {}

    def add(self, tree: Tree) -> None:
        rows = 0
        for name, value in tree.items():
            if isinstance(value, dict):
                into = self.tree.setdefault(name, {})
                for k, v in value.items():
                    rows = self._put(into, k, v)
            else:
                rows = self._put(self.tree, name, value)
        self.filled += rows

    def _put(self, into: dict, key: str, value: torch.Tensor) -> int:
        if key not in into:
            into[key] = value.new_empty((self.total, *value.shape[1:]))
        into[key][self.filled:self.filled + value.shape[0]] = value
        return value.shape[0]


def initial_state(alg, fed, model, seed: int) -> State:
    """``alg.server_init`` then its ``init_phase`` (the clients' part of initialisation)."""
    state = alg.server_init(fed, model, seed)
    return run_phases(alg, state, fed, model, alg.init_phase(state, fed, model))


def server_init(alg, fed, model, seed: int) -> State:
    """The data-free initial state (what a Flower server can compute from the counts)."""
    return alg.server_init(fed, model, seed) if hasattr(alg, "server_init") else \
        alg.init(fed, model, seed)


def engine_view(alg, state: State, fed, phase: Phase) -> ClientView:
    """The participants' view in the batched engine (every client taking part: the state's
    rows as they are, no copies)."""
    whole = phase.clients.numel() == fed.num_clients
    idx = phase.clients.to(fed.device)

    def rows(v):
        return v if whole else v[idx]

    models = {k: {n: rows(v) for n, v in p.items()} for k, p in state.models.items()
              if alg.is_client_model(k)}
    server = sent_models(alg, state, phase)
    tensors = {k: rows(state.tensors[k]) for k in alg.client_tensors}
    lazy = getattr(alg, "lazy_batches", False)
    batches = {k: lazy_gather(fed.train, b) if lazy else fed.train.gather(b)
               for k, b in ((k, participant_batches(b, phase.clients, fed.num_clients))
                            for k, b in phase.batches.items())}
    train = fed.train if whole else (participant_split(fed.train, idx)
                                     if getattr(alg, "needs_train", False) else None)
    return ClientView(state.round, state.seed, fed.num_clients, fed.num_classes, phase.clients,
                      server, phase.payload, models, tensors, batches,
                      train, fed.test if whole else None)


def participant_split(split, clients: torch.Tensor):
    """The rows of ``clients`` (sorted) of ``split`` as a split of its own (same order)."""
    from synthetic.federation import Split

    counts = split.counts[clients]
    offsets = torch.cumsum(counts, 0) - counts
    rows = torch.repeat_interleave(split.offsets[clients] - offsets, counts) + \
        torch.arange(int(counts.sum()), device=counts.device)
    return Split(split.x[rows], split.y[rows], offsets, counts)


def participant_batches(batches: torch.Tensor, clients: torch.Tensor, num_clients: int
                        ) -> torch.Tensor:
    """The participants' columns ``[R, P, B]`` of a phase's mini-batch indices ``batches``:
    every client's ``[R, N, B]`` sliced at ``clients``, or ``batches`` itself when it holds
    exactly the participants' columns (see :class:`Phase`); anything else is a
    ``ValueError``."""
    if batches.shape[1] == clients.numel():
        return batches                       # the participants' own (or everyone's) columns
    if batches.shape[1] == num_clients:
        return batches[:, clients.to(batches.device)]
    raise ValueError(f"mini-batch indices with {batches.shape[1]} columns for {clients.numel()} "
                     f"participants of {num_clients} clients")


class LazyRows:
    """``source[index]`` for mini-batch indices ``index [R, P, B]``, gathered only when a
    local round is picked: ``rows[r]`` (or any key that drops the round axis) is the tensor
    ``source[index[r]]``; a key that keeps the round axis (``rows[:, a:b]``, ``rows[:-1]``)
    is another ``LazyRows``.  Peak memory is one round's batch (of the clients picked)
    instead of all ``R`` rounds' — at N = 100,000, R = 20, |D| = 20, d = 60 that is 9.6 GB
    — and the values are the same gather, bit for bit."""

    __slots__ = ("source", "index")

    def __init__(self, source: torch.Tensor, index: torch.Tensor):
        self.source, self.index = source, index

    @property
    def shape(self) -> torch.Size:
        return torch.Size((*self.index.shape, *self.source.shape[1:]))

    def __len__(self) -> int:
        return self.index.shape[0]

    def __getitem__(self, key):
        index = self.index[key]
        if index.dim() == self.index.dim():
            return LazyRows(self.source, index)
        return self.take(self.source, index)

    @staticmethod
    def take(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The gather itself (one place, so a test can count what is materialised):
        ``source[index]``, computed as ``index_select`` on the flattened index and viewed back
        — the same rows bit for bit, ~10× faster on CPU than advanced indexing (157 → 15 µs
        for a [100, 20] index into [200k, 60] rows: a fifth of a pFedMe round at N = 100)."""
        rows = source.index_select(0, index.reshape(-1))
        return rows.view(*index.shape, *source.shape[1:])


def lazy_gather(split, index: torch.Tensor) -> tuple[LazyRows, LazyRows]:
    """``split.gather(index)`` deferred: ``(x, y)`` as :class:`LazyRows`."""
    return LazyRows(split.x, index), LazyRows(split.y, index)


def sent_models(alg, state: State, phase: Phase) -> dict[str, Params]:
    """The server models the participants of ``phase`` receive."""
    return {k: p for k, p in state.models.items()
            if not alg.is_client_model(k) and k not in alg.server_rows
            and (phase.send is None or k in phase.send)}


def scatter_client_state(alg, state: State, clients: torch.Tensor, kept: Tree) -> State:
    """``state`` with the participants' rows of the client models/tensors replaced (all
    clients taking part: the new rows as they are)."""
    if not kept:
        return state
    models, tensors = dict(state.models), dict(state.tensors)
    for name, value in kept.items():
        store = models if isinstance(value, dict) else tensors
        store[name] = _scatter(store.get(name), clients, value)
    return state.replace(models=models, tensors=tensors)


def _scatter(old, clients: torch.Tensor, new):
    if isinstance(new, dict):
        if not old or not new or clients.numel() == _rows_of(old):
            return new
        idx = clients.to(next(iter(old.values())).device)
        return {k: v.index_copy(0, idx, new[k]) for k, v in old.items()}
    if old is None or clients.numel() == old.shape[0]:
        return new
    return old.index_copy(0, clients.to(old.device), new)


def upload_rows(phase: Phase, upload: Tree) -> Tree:
    """The uploads of ``phase.uploaders`` (rows of the participants' uploads)."""
    if phase.uploaders is None or phase.uploaders.numel() == phase.clients.numel():
        return upload
    rows = torch.isin(phase.clients, phase.uploaders).nonzero().flatten()
    return {k: _rows(v, rows) for k, v in upload.items()}


def with_server(state: State, models: dict[str, Params] | None = None,
                tensors: dict[str, torch.Tensor] | None = None) -> State:
    """``state`` with server entries replaced (other entries kept)."""
    return state.replace(models={**state.models, **(models or {})},
                         tensors={**state.tensors, **(tensors or {})})


def train_phase(state: State, fed, steps: int, batch_size: int, clients_per_round: int, *,
                name: str = "train", payload=None) -> Phase:
    """The common draw: ``steps`` mini-batches for every client, then ``S`` clients
    (FedAvg's order on stream 0 of the round generator).

    The phase keeps only the sampled clients' columns (``[steps, S, B]``): with ``S < N``
    the generator is first advanced past the mini-batches without keeping them
    (:meth:`~synthetic.federation.Federation.skip_batches`), the clients are drawn, then
    the mini-batches are drawn again from the saved generator state for those clients
    only — the same numbers as drawing everyone's and slicing (tested), so results are
    unchanged; only the uniform draw itself (twice) stays proportional to N.  With
    ``S = N`` everything is drawn once, as before."""
    from algorithms.engine.base import sample_clients

    gen = state.generator()
    if clients_per_round >= fed.num_clients:
        batches = fed.sample_batches(steps, batch_size, gen)
        chosen = sample_clients(fed.num_clients, clients_per_round, gen)
        return Phase(name, chosen, {"sgd": batches}, payload or {})
    start = gen.get_state()
    fed.skip_batches(steps, batch_size, gen)
    chosen = sample_clients(fed.num_clients, clients_per_round, gen)
    batches = fed.sample_batches(steps, batch_size, torch.Generator().set_state(start),
                                 clients=chosen)
    return Phase(name, chosen, {"sgd": batches}, payload or {})


def client_federation(fed, i: int):
    """Client ``i`` of ``fed`` as a one-client federation (same rows, same order): what a
    client holds under Flower, what it gets from ``Federation.from_client_arrays([x_i],
    [y_i], seed=seed + i)``."""
    from synthetic.federation import Federation, Split

    if not 0 <= i < fed.num_clients:
        raise ValueError(f"client index {i} outside 0..{fed.num_clients - 1}")

    def part(s: Split) -> Split:
        o, c = int(s.offsets[i]), int(s.counts[i])
        return Split(s.x[o:o + c].clone(), s.y[o:o + c].clone(),
                     torch.zeros(1, dtype=torch.long, device=s.offsets.device),
                     s.counts[i:i + 1].clone())

    return Federation(part(fed.train), part(fed.test), fed.num_classes, f"{fed.name}[{i}]")


def stack_trees(trees: list[Tree]) -> Tree:
    """Per-client dicts of parameter dicts / tensors (``[1, ...]`` rows) → one dict stacked
    along dim 0, in list order."""
    out: Tree = {}
    for name in (trees[0] if trees else {}):
        rows = [t[name] for t in trees]
        out[name] = torch.cat(rows) if isinstance(rows[0], torch.Tensor) else \
            {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
    return out


def everyone(fed) -> torch.Tensor:
    return torch.arange(fed.num_clients)


def _rows(value, rows: torch.Tensor):
    if isinstance(value, dict):
        return {k: v[rows.to(v.device)] for k, v in value.items()}
    return value[rows.to(value.device)]


def _rows_of(params: Params) -> int:
    return next(iter(params.values())).shape[0]
