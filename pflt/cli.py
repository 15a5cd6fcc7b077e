"""The ``pflt`` command line.

Sub-commands are discovered from the modules of :mod:`pflt.commands`: each module
defines ``add_parser(subparsers)`` which registers its sub-command and sets
``func=<callable(args) -> int>`` as default.

Error contract: every anticipated error — bad options (argparse), :class:`UserError`,
``ValueError`` (invalid input to any function, including TOML/JSON decoding), ``OSError``
(missing file, directory where a file is expected, permissions, disk full),
``OverflowError``, ``MemoryError`` and CUDA out-of-memory — is reported as *one line*
``pflt <command>: error: <message>`` on stderr with exit code 2, no traceback (set
``PFLT_DEBUG=1`` to see it).  A run that diverges exits 1 (see :mod:`algorithms.runner`).
A reader that closes standard output early (``pflt select-k … | head -1``) ends the command
quietly with exit code 141 (= 128 + SIGPIPE, what a shell reports for a process killed by
it), nothing on stderr.  Anything else is a bug and keeps its traceback.
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


#: exception classes reported as a one-line user error (exit 2)
ANTICIPATED = (UserError, ValueError, OSError, OverflowError, MemoryError)


class OneLineParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``prog: error: message (see prog --help)``."""

    def error(self, message: str):  # noqa: D102 - argparse API
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return " ".join(text.split())


def _anticipated(exc: BaseException) -> bool:
    if isinstance(exc, BrokenPipeError):    # stdout closed by its reader: see main
        return False
    if isinstance(exc, ANTICIPATED):
        return True
    if isinstance(exc, RuntimeError) and "DefaultCPUAllocator" in str(exc):
        return True                                  # torch's CPU out-of-memory
    return type(exc).__name__ == "OutOfMemoryError"  # torch.cuda.OutOfMemoryError


def build_parser() -> argparse.ArgumentParser:
    """The ``pflt`` parser with one sub-command per module of :mod:`pflt.commands`."""
    parser = OneLineParser(
        prog="pflt",
        description="pfl-theory: personalized federated learning algorithms, theory and "
        "numerical verification.",
    )
    parser.add_argument("--version", action="version", version=f"pfl-theory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    import pflt.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"pflt.commands.{info.name}")
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
    return parser


#: exit code when standard output was closed by its reader (128 + SIGPIPE)
CLOSED_STDOUT = 141


def main(argv: list[str] | None = None) -> int:
    """Run ``pflt`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code (0 ok,
    1 a failure the command reports, 2 a usage error, 141 standard output closed early).

    Standard output is flushed here, so a reader that went away (``| head -1``) shows up
    as :class:`BrokenPipeError` inside this function — at a ``print`` or at that flush,
    ``--help`` included — and not as a traceback at interpreter exit."""
    try:
        try:
            return _main(argv)
        finally:
            if sys.stdout is not None:      # None: started with standard output closed
                sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return CLOSED_STDOUT
    except KeyboardInterrupt:   # Ctrl-C while starting (imports, parsing): no traceback
        print("pflt: interrupted", file=sys.stderr)
        return 130


def _stdout_to_devnull() -> None:
    """Point file descriptor 1 at /dev/null: what is still buffered is dropped at exit
    instead of failing again (the Python documentation's recipe for SIGPIPE)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):   # no real descriptor (captured stdout)
        pass


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # sub-commands may need to know which options were given explicitly
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:
        if os.environ.get("PFLT_DEBUG") or not _anticipated(exc):
            raise
        print(f"pflt {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
