"""Which clients the Flower server talks to: :class:`Membership`, the part of
:class:`algorithms.flower.strategy.PFLStrategy` that sends exchanges, drops *gone* clients
(no reply, or their node unavailable: :func:`~algorithms.flower.exchange.sort_replies`),
records every client left out (``failures``: round, phase, clients, up to 3 reasons),
lets gone clients back in when a node answers the handshake with their index (a restarted
SuperNode: new node id, same ``partition-id``), handing it the server's last copy of
the client's rows (``rows_copy``: the initial state, updated at each collection), and
collects the full state with NaN rows for the clients that are missing.
"""

from __future__ import annotations

from logging import INFO
from typing import Callable

import torch
from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore import log

from algorithms.engine.base import State
from algorithms.flower.client import INFO as INFO_KEY, KEPT, SETTINGS
from algorithms.flower.exchange import Sorted, sort_replies
from algorithms.flower.records import pack, stack_rows, unpack


class Membership:
    """Mixin over the strategy's ``settings``, ``grid`` (a ``PollingGrid``), ``timeout``,
    ``state``, ``failures``, ``node_of`` (client → node), ``active`` (clients sent to),
    ``left_at`` (gone client → round), ``rejoin`` (a ``Rejoin``) and ``rows_copy``."""

    def _handshake(self) -> RecordDict:
        return RecordDict({SETTINGS: self.settings.to_record()})

    def _client_of_node(self) -> dict[int, int]:
        return {node: i for i, node in self.node_of.items()}

    def _exchange(self, clients: list[int], kind: str, content: Callable[[int], RecordDict]
                  ) -> Sorted:
        """Send ``kind`` to ``clients``; gone clients leave :attr:`active`."""
        messages = [Message(content(i), dst_node_id=self.node_of[i], message_type=kind)
                    for i in clients]
        replies = self.grid.send_and_receive(messages, timeout=self.timeout)
        out = sort_replies(self.grid, replies, clients, self._client_of_node(), self.timeout)
        self._drop(out.gone)
        return out

    def _ask(self, grid: Grid, nodes: list[int], kind: str,
             content: Callable[[int], RecordDict]) -> list[Message]:
        """An exchange every client must answer (set-up)."""
        index = self._client_of_node()
        out = self._exchange([index[node] for node in nodes], kind, content)
        if out.failed:
            i, reason = next(iter(out.failed.items()))
            raise RuntimeError(f"{len(out.failed)} client(s) failed in {kind}: client {i}: {reason}")
        return [out.ok[index[node]] for node in nodes]

    def _drop(self, clients) -> None:
        for i in clients:
            if i in self.active:
                self.active.discard(i)
                self.left_at[i] = self.state.round if self.state is not None else 0

    def _record(self, phase: str, clients: list[int], out: Sorted | None) -> None:
        """A failure entry: the clients left out of ``phase`` and up to 3 distinct reasons."""
        reasons = []
        for i in clients:
            why = (out.failed.get(i) if out is not None else None) or \
                f"gone since round {self.left_at.get(i)} (no message sent)"
            if why not in reasons:
                reasons.append(why)
        self.failures.append({"round": self.state.round, "phase": phase, "clients": clients,
                              "reasons": reasons[:3]})
        log(INFO, "\t├── round %d, %s: clients %s left out (%s)", self.state.round, phase,
            clients, reasons[0])

    def _admit(self) -> None:
        """Let gone clients back in: handshake answers that arrived since the last call
        (a restarted SuperNode gets the client's rows of :attr:`rows_copy`), and new
        handshakes to the connected nodes that serve no active client."""
        gone = set(range(self.settings.num_clients)) - self.active
        if not gone:
            return
        for reply in self.rejoin.answers():
            rec = dict(reply.content[INFO_KEY])
            i, node = int(rec["client"]), self.grid.node_of_reply(reply)
            if i not in gone:
                continue                       # a second node for an active client: ignored
            self.node_of[i] = node
            how = "its node kept its rows"
            if not bool(rec.get("kept", False)):
                since, rows = self.rows_copy[i]
                out = self._exchange([i], "query.init", lambda _: RecordDict({KEPT: pack(rows)}))
                self.active.discard(i)           # (_exchange's bookkeeping: not yet back)
                if i not in out.ok:
                    continue
                how = f"its rows as of round {since} (the server's last copy)"
            self.active.add(i)
            gone.discard(i)
            self.failures.append({"round": self.state.round, "phase": "rejoin", "clients": [i],
                                  "reasons": [f"node {node} serves client {i} again (gone since "
                                              f"round {self.left_at.pop(i, None)}); {how}"]})
            log(INFO, "\t├── round %d: client %d rejoined (node %d)", self.state.round, i, node)
        if gone:
            self.rejoin.probe(busy=[self.node_of[i] for i in self.active])

    def collect(self, grid: Grid) -> State:
        """The full engine state: server models and tensors + every client's kept rows.

        A gone client (no reply) and a client that missed an exchange creating or reshaping
        an entry (PPFE's stage transition) have no matching row: it is filled with NaN (−1
        for integer tensors) and recorded in :attr:`failures` (phase ``collect``)."""
        n = self.settings.num_clients
        self._admit()
        out = self._exchange(sorted(self.active), "query.collect", lambda i: RecordDict({}))
        kept = {i: unpack(r.content[KEPT], device=self.device) for i, r in out.ok.items()}
        absent = [i for i in range(n) if i not in kept]
        if absent:
            self._record("collect", absent, out)
        models, tensors = dict(self.state.models), dict(self.state.tensors)
        complete = set(kept)
        for name in sorted({k for rows in kept.values() for k in rows}):
            template = _majority([rows[name] for rows in kept.values() if name in rows])
            rows, missing = [], []
            for i in range(n):
                mine = kept.get(i, {}).get(name)
                if _like(mine, template):
                    rows.append(mine)
                else:
                    rows.append(_filled(template))
                    missing.append(i)
            complete -= set(missing)
            if missing := [i for i in missing if i in kept]:
                self.failures.append({"round": self.state.round, "phase": "collect",
                                      "clients": missing, "reasons": [f"no row of {name}"]})
            (models if isinstance(template, dict) else tensors)[name] = stack_rows(rows)
        for i in complete:
            self.rows_copy[i] = (self.state.round, kept[i])
        return self.state.replace(models=models, tensors=tensors)


def _signature(value) -> tuple:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    return tuple(sorted((k, tuple(v.shape), v.dtype) for k, v in value.items()))


def _like(value, template) -> bool:
    return value is not None and isinstance(value, dict) == isinstance(template, dict) and \
        _signature(value) == _signature(template)


def _majority(values: list):
    """The most common layout among the clients' rows of one entry."""
    sigs = [_signature(v) for v in values]
    return values[max(range(len(values)), key=sigs.count)]


def _filled(template):
    def fill(t):
        return torch.full_like(t, float("nan") if t.is_floating_point() else -1)
    return fill(template) if isinstance(template, torch.Tensor) else \
        {k: fill(v) for k, v in template.items()}
