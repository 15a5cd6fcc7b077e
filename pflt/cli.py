"""The ``pflt`` command line.

Sub-commands are discovered from the modules of :mod:`pflt.commands`: each module
defines ``add_parser(subparsers)`` which registers its sub-command and sets
``func=<callable(args) -> int>`` as default.  User errors (bad input) are raised as
:class:`UserError` or ``ValueError`` and reported in one line with exit code 2 — no
traceback
(set ``PFLT_DEBUG=1`` to see it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from pfl_theory import __version__


class UserError(Exception):
    """An error in what the user asked for; printed without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pflt",
        description="pfl-theory: personalized federated learning algorithms, theory and "
        "numerical verification.",
    )
    parser.add_argument("--version", action="version", version=f"pfl-theory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import pflt.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"pflt.commands.{info.name}")
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # sub-commands may need to know which options were given explicitly
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError, FileNotFoundError) as exc:
        if os.environ.get("PFLT_DEBUG"):
            raise
        print(f"pflt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
