"""A Flower SuperNode whose ClientApp stays in memory: ``python -m algorithms.flower.supernode``.

Flower 1.41 runs every message a SuperNode receives in a fresh ``flwr-clientapp`` process
(started by its SuperExec): Python, Flower and torch are imported, the FAB installed, the
client's data read and its model rebuilt — about 2–3 s of start-up per message on an idle
core, far more than the message's work for small models.  On top of that the SuperNode's
main loop sleeps 3 s whenever it finds no message (hard-coded in
``flwr.supernode.start_client_internal``), so every exchange waits ~3 s for the node to
look again.

This launcher runs Flower's own ``flower-supernode`` (same options, all passed through)
with two changes:

* ``--isolation process`` and, in a thread of the same process, a *persistent task
  executor*: it acquires the SuperNode's ClientApp tasks from its Runtime API one after
  the other and runs :data:`algorithms.flower.app.client_app` in this process — the
  data, the model and the algorithm are built once per run (the ClientApp's cache) instead
  of once per message.  Message, context and reply travel exactly as with
  ``flwr-clientapp`` (Flower's own ``pull_task_input`` / ``push_message`` /
  ``push_task_output``), so the node's ``context.state`` is still kept by the SuperNode;
* ``--poll SECONDS`` (default 0.1): the SuperNode's idle wait between two pulls from the
  SuperLink (Flower: 3 s) and its first back-off when a message's objects are not there
  yet (Flower: 1 s).  Shorter waits cost one small HTTP request per wait and node.

A run whose FAB names another ClientApp is refused (error reply).  The process is one pid
per client: stopping it stops the node and its executor; SIGTERM or SIGINT ends it within
``EXIT_WITHIN`` = 3 s (Flower's graceful shutdown gets that long:
:func:`bounded_shutdown`).  Uses Flower internals (the
Runtime API client and the SuperNode loop's ``time`` module): tied to the pinned
``flwr==1.41.0``; the stock ``flower-supernode`` works with the same apps, only slower.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import signal
import sys
import threading
import time
import tomllib
import types
import zipfile

APP_REF = "algorithms.flower.app:client_app"
TASK_POLL = 0.05          # s between two AcquireTask calls of the executor when idle
EXIT_WITHIN = 3.0         # s from SIGTERM/SIGINT to the end of the process, at most


def fast_poll(seconds: float) -> None:
    """Make the SuperNode's idle wait ``seconds`` (its loop calls ``time.sleep(3)``)."""
    import flwr.supernode.start_client_internal as loop

    def sleep(s: float) -> None:
        time.sleep(min(s, seconds))

    fast = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time)
                                    if not k.startswith("_")})
    fast.sleep = sleep
    loop.time = fast
    # a message's objects still on their way from the SuperLink: look again after
    # ``seconds``, not after Flower's first back-off of 1 s
    if not hasattr(loop.pull_objects, "keywords"):
        loop.pull_objects = functools.partial(loop.pull_objects, initial_backoff=seconds,
                                              backoff_cap=max(seconds, 1.0))


def fab_clientapp(fab_content: bytes) -> str:
    """The ``clientapp`` component named by a FAB's ``pyproject.toml``."""
    with zipfile.ZipFile(io.BytesIO(fab_content)) as fab:
        config = tomllib.loads(fab.read("pyproject.toml").decode())
    return str(config["tool"]["flwr"]["app"]["components"]["clientapp"])


def pull_task_input(client, backoff: float):
    """Flower's ``pull_task_input`` of ``flwr-clientapp``, with a short first back-off
    (Flower: 1 s) for the message's objects, which the SuperNode may still be fetching
    from the SuperLink when the task is handed out."""
    from flwr.proto.node_pb2 import Node  # pylint: disable=E0611
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest  # pylint: disable=E0611
    from flwr.app import Message
    from flwr.common.serde import context_from_proto, fab_from_proto, run_from_proto
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf, make_pull_object_fn_protobuf)
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
    from flwr.supercore.task_identity import TaskIdentity

    res = client.PullTaskInput(PullTaskInputRequest())
    TaskIdentity.task_id, TaskIdentity.run_id = res.task_id, res.run.run_id
    TaskIdentity.node_id = res.context.node_id
    context, run, fab = context_from_proto(res.context), run_from_proto(res.run), fab_from_proto(res.fab)
    pulled = client.PullMessages(PullAppMessagesRequest())
    if not pulled.messages_list:
        raise RuntimeError("no message received from the SuperNode's Runtime API")
    node, tree = Node(node_id=context.node_id), pulled.message_object_trees[0]
    message = pull_and_inflate_object_from_tree(
        tree, make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
        make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node,
                                                  context.run_id),
        return_type=Message, initial_backoff=backoff, backoff_cap=max(backoff, 1.0))
    message.metadata.__dict__["_message_id"] = tree.object_id
    return message, context, run, fab


def run_task(address: str, token: str, client_app, backoff: float = 0.02) -> None:
    """One ClientApp task, as ``flwr-clientapp`` runs it, but in this process."""
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    client = RuntimeHttpClient.from_server_address(
        server_address=address, insecure=True, root_certificates=None,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                      RuntimeTokenHttpInterceptor(token)],
        retry_invoker=make_simple_http_retry_invoker())
    context, status, details, reply = None, SubStatus.FAILED, "", None
    done = threading.Event()
    threading.Thread(target=_heartbeats, args=(client, done), daemon=True).start()
    try:
        message, context, _run, fab = pull_task_input(client, backoff)
        try:
            wanted = fab_clientapp(fab.content)
            if wanted != APP_REF:
                raise ValueError(f"this SuperNode serves {APP_REF}, the run's app wants {wanted}")
            reply = client_app(message=message, context=context)
            status = SubStatus.COMPLETED
        except Exception as exc:      # as flwr-clientapp: an error reply, the node goes on
            details = f"{type(exc)}:<'{exc}'>"
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                            reply_to=message)
        push_message(client, reply, context)
    finally:
        done.set()
        push_task_output(client=client, context=context, sub_status=status, details=details)
        client.close()


def _heartbeats(client, done: threading.Event, every: float = 10.0) -> None:
    """The task's heartbeats while it runs (as ``flwr-clientapp``'s), so that a long
    client update is not taken for a dead task."""
    from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest  # pylint: disable=E0611
    while not done.wait(every):
        try:
            client.SendTaskHeartbeat(SendTaskHeartbeatRequest())
        except Exception:             # the node is going down or the task ended: stop
            return


def serve(address: str, stop: threading.Event) -> None:
    """Acquire and run the SuperNode's ClientApp tasks until ``stop`` is set."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=E0611
    from flwr.supercore.constant import TaskType
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor

    from algorithms.flower.app import client_app

    client = RuntimeHttpClient.from_server_address(
        server_address=address, insecure=True, root_certificates=None,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        retry_invoker=make_simple_http_retry_invoker())
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
    while not stop.is_set():
        try:
            res = client.AcquireTask(request)
        except Exception:            # the node's API is not up yet (or going down)
            time.sleep(0.2)
            continue
        if res.HasField("task") and res.token:
            try:
                run_task(address, res.token, client_app)
            except Exception as exc:  # a task that could not even be pulled: log, go on
                print(f"pflt supernode: task {res.task.task_id} failed: {exc}", file=sys.stderr)
        else:
            time.sleep(TASK_POLL)


def bounded_shutdown(seconds: float = EXIT_WITHIN) -> None:
    """Every SIGINT/SIGTERM handler installed from now on (Flower's graceful exit) first
    starts a timer that ends the process after ``seconds``, should Flower's shutdown hang
    (its connection retries, its HTTP server); :func:`main` then skips the interpreter's
    finalization. Without both, a SuperNode took 8–11 s to stop after SIGTERM (measured,
    SuperLink gone), longer than a process manager waits before SIGKILL."""
    real = signal.signal

    def install(sig, handler):
        if sig in (signal.SIGINT, signal.SIGTERM) and callable(handler):
            def bounded(signum, frame, _graceful=handler):
                timer = threading.Timer(seconds, os._exit, args=(128 + signum,))
                timer.daemon = True
                timer.start()
                _graceful(signum, frame)
            previous = real(sig, bounded)
            if sig == signal.SIGTERM:        # installed: say so (tests wait for this line)
                print(f"pflt supernode: SIGTERM or SIGINT stops this node within {seconds:g} s",
                      file=sys.stderr, flush=True)
            return previous
        return real(sig, handler)

    signal.signal = install


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    poll_parser = argparse.ArgumentParser(add_help=False)
    poll_parser.add_argument("--poll", type=float, default=0.1)
    known, passed = poll_parser.parse_known_args(argv)      # everything else: flower-supernode's
    node = argparse.ArgumentParser(add_help=False)
    node.add_argument("--host", default="127.0.0.1")
    node.add_argument("--port", type=int, default=9094)
    node.add_argument("--isolation")
    where, _ = node.parse_known_args(passed)
    if not 0.0 < known.poll <= 3.0:
        sys.exit(f"pflt supernode: error: --poll must be in (0, 3] seconds, got {known.poll}")
    if where.isolation not in (None, "process"):
        sys.exit("pflt supernode: error: it runs its own executor (--isolation process); "
                 "use flower-supernode for subprocess isolation")
    if where.isolation is None:
        passed += ["--isolation", "process"]
    host = "127.0.0.1" if where.host in ("0.0.0.0", "") else where.host
    fast_poll(known.poll)
    stop = threading.Event()
    threading.Thread(target=serve, args=(f"{host}:{where.port}", stop), daemon=True,
                     name="pflt-clientapp-executor").start()
    bounded_shutdown()
    sys.argv = ["flower-supernode", *passed]
    from flwr.supernode.cli.flower_supernode import flower_supernode
    try:
        flower_supernode()
        code = 0
    except SystemExit as stopped:          # Flower's graceful exit on SIGTERM/SIGINT
        code = stopped.code if isinstance(stopped.code, int) else int(stopped.code is not None)
    finally:
        stop.set()
    # Flower has shut down; the interpreter's own finalization would take ~4 s more
    # (measured): end here, after flushing what was printed
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
