"""``--device`` for the commands that train or evaluate inside library code (``verify``,
``figures``, ``select-k``, ``select-stages``, ``worst-case``): the device is checked like ``pflt run``'s
(:func:`pflt.commands.run_checks.check_device`: one line, exit 2, for a device this machine
lacks) and the command runs inside :func:`synthetic.federation.device_scope`, so every
federation the checks and figures build — and the engine state on it — lives there.
Without ``--device`` nothing changes (those computations stay on the CPU)."""

from __future__ import annotations

import argparse
import functools
from typing import Callable

HELP = ("cpu or cuda[:K]: where the training and evaluation run (default: each "
        "computation's own, mostly cpu)")


def add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, metavar="DEVICE", help=HELP)


def with_device(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func(args)`` run inside the device scope of ``args.device``; without ``--device``
    no scope (it would change nothing) and no torch imported for it: ``pflt verify --only``
    of a check that needs no torch does not load it."""
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "device", None) is None:
            return func(args)
        from pflt.commands.run_checks import check_device
        from synthetic.federation import device_scope

        with device_scope(check_device(getattr(args, "device", None))):
            return func(args)
    return run
