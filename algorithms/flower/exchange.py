"""Server-side message exchanges that survive clients (used by
:class:`algorithms.flower.strategy.PFLStrategy`).

* :class:`PollingGrid` wraps any Flower ``Grid``: ``send_and_receive`` looks for replies
  every ``poll`` seconds (Flower's HTTP grid sleeps 3 s between two looks, a floor under
  every exchange of a deployment) and remembers where each message went, so that an error
  reply — which the SuperLink sends in the name of the SuperLink, not of the node — is
  charged to the right client;
* :func:`sort_replies` splits an exchange's replies into the clients that answered, the
  clients that failed (with the reason) and, among those, the clients that are *gone*: no
  reply within the timeout, or Flower reports their node unavailable (a SuperNode that
  stopped sending heartbeats: after 2 × 30 s in Flower 1.41).  A gone client receives no
  more messages until it answers a handshake again (:class:`Rejoin`);
* :class:`Rejoin` probes, without waiting, the nodes that are connected but serve no
  active client: a node that answers the handshake with a client index whose client is
  gone takes that client's place (a restarted SuperNode gets a new node id; the client is
  recognised by its ``partition-id``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from flwr.app import Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

UNAVAILABLE = {ErrorCode.NODE_UNAVAILABLE, ErrorCode.MESSAGE_UNAVAILABLE,
               ErrorCode.REPLY_MESSAGE_UNAVAILABLE}


class PollingGrid(Grid):
    """``grid`` with a ``poll``-second reply loop and a record of each message's node."""

    def __init__(self, grid: Grid, poll: float = 0.05, abort: threading.Event | None = None):
        self.inner, self.poll, self.abort = grid, float(poll), abort
        self.destination: dict[str, int] = {}
        _short_object_backoff(grid, self.poll)

    @property
    def run(self):
        return self.inner.run

    def set_run(self, run_id: int) -> None:
        self.inner.set_run(run_id)

    def create_message(self, *args, **kwargs) -> Message:
        return self.inner.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.inner.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        ids = list(self.inner.push_messages(messages))
        for mid, msg in zip(ids, messages):
            self.destination[mid] = msg.metadata.dst_node_id
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.inner.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        pending = set(self.push_messages(messages))
        return self.receive(pending, timeout)

    def receive(self, pending: set[str], timeout: float | None,
                enough: Callable[[list[Message]], bool] | None = None) -> list[Message]:
        """Replies to ``pending`` until all arrived, ``enough(replies)`` or ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while pending:
            got = list(self.pull_messages(pending))
            replies.extend(got)
            pending.difference_update(m.metadata.reply_to_message_id for m in got)
            if not pending or (enough is not None and enough(replies)):
                break
            if end is not None and time.monotonic() >= end:
                break
            check(self.abort)
            time.sleep(self.poll)
        return replies

    def node_of_reply(self, reply: Message) -> int:
        return self.destination.get(reply.metadata.reply_to_message_id,
                                    reply.metadata.src_node_id)


def _short_object_backoff(grid: Grid, seconds: float) -> None:
    """Under a deployment (Flower's ``HttpGrid``, in the ``flwr-serverapp`` process that
    runs only this app): a reply's objects still on their way from the SuperNode are
    looked for again after ``seconds`` instead of Flower's first back-off of 1 s."""
    import functools

    from flwr.superlink.grid import http_grid

    if isinstance(grid, http_grid.HttpGrid) and not hasattr(http_grid.pull_objects, "keywords"):
        http_grid.pull_objects = functools.partial(
            http_grid.pull_objects, initial_backoff=seconds, backoff_cap=max(seconds, 1.0))


@dataclass
class Sorted:
    """An exchange's outcome by client index."""

    ok: dict[int, Message] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)      # client -> reason
    gone: set[int] = field(default_factory=set)               # failed and not to be sent to


def sort_replies(grid: PollingGrid, replies: Iterable[Message], expected: Iterable[int],
                 client_of_node: dict[int, int], timeout: float) -> Sorted:
    """Split ``replies`` to the clients ``expected`` (see the module doc)."""
    out = Sorted()
    for reply in replies:
        i = client_of_node.get(grid.node_of_reply(reply))
        if i is None:
            continue
        if reply.has_error():
            out.failed[i] = reply.error.reason
            if reply.error.code in UNAVAILABLE:
                out.gone.add(i)
        else:
            out.ok[i] = reply
    for i in expected:
        if i not in out.ok and i not in out.failed:
            out.failed[i] = f"no reply within the timeout ({timeout:g} s)"
            out.gone.add(i)
    return out


class Rejoin:
    """Handshakes with connected nodes that serve no active client, answered later."""

    def __init__(self, grid: PollingGrid, handshake: Callable[[], RecordDict]):
        self.grid, self.handshake = grid, handshake
        self.pending: dict[str, int] = {}                     # message id -> node

    def probe(self, busy: Iterable[int]) -> None:
        """Send the handshake to every connected node not in ``busy`` nor probed already."""
        waiting = set(self.pending.values()) | set(busy)
        nodes = [n for n in self.grid.get_node_ids() if n not in waiting]
        if nodes:
            msgs = [Message(self.handshake(), dst_node_id=n, message_type="query.setup")
                    for n in nodes]
            ids = self.grid.push_messages(msgs)
            self.pending.update(zip(ids, nodes))

    def answers(self) -> list[Message]:
        """The handshake replies that arrived (errors dropped: such a node is probed again)."""
        if not self.pending:
            return []
        got = list(self.grid.pull_messages(set(self.pending)))
        for reply in got:
            self.pending.pop(reply.metadata.reply_to_message_id, None)
        return [r for r in got if not r.has_error()]


class Aborted(RuntimeError):
    """The runtime around the server ended (e.g. Ray failed to start): stop waiting."""


def check(abort: threading.Event | None) -> None:
    if abort is not None and abort.is_set():
        raise Aborted("the Flower runtime ended; the server stops waiting")


def wait_for_nodes(grid: Grid, n: int, wait_seconds: float,
                   abort: threading.Event | None = None) -> list[int]:
    """The connected node ids once there are at least ``n`` (error after ``wait_seconds``)."""
    end = time.monotonic() + wait_seconds
    while len(nodes := list(grid.get_node_ids())) < n:
        if time.monotonic() > end:
            raise TimeoutError(f"only {len(nodes)} of {n} client nodes connected within "
                               f"{wait_seconds} s")
        check(abort)
        time.sleep(0.1)
    return nodes
