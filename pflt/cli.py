"""The ``pflt`` command line.

Sub-commands are discovered from the modules of :mod:`pflt.commands`: each module
defines ``add_parser(subparsers)`` which registers its sub-command and sets
``func=<callable(args) -> int>`` as default.  Only the named command's module is imported
(:func:`build_parser`), and ``pflt --version`` imports none: 4.7–5.6 s → 0.3–0.5 s on the
project's shared 2-core machine (2026-11-26, load 5–8), no torch.

Plugins: ``--plugin SPEC`` anywhere on the line (any command, repeatable) or
``PFLT_PLUGINS`` loads the user's modules registering algorithms and checks
(:mod:`pfl_theory.plugins`, docs/extending.md); one that does not load is a one-line error.

Error contract: every anticipated error — bad options (argparse), :class:`UserError`,
``ValueError`` (invalid input to any function, including TOML/JSON decoding), ``OSError``
(missing file, directory where a file is expected, permissions, disk full),
``OverflowError``, ``MemoryError`` and CUDA out-of-memory — is reported as *one line*
``pflt <command>: error: <message>`` on stderr with exit code 2, no traceback (set
``PFLT_DEBUG=1`` to see it).  A run that diverges exits 1 (see :mod:`algorithms.engine.runner`).
A reader that closes standard output early (``pflt select-k … | head -1``) ends the command
quietly with exit code 141 (= 128 + SIGPIPE, what a shell reports for a process killed by
it), nothing on stderr.  Anything else is a bug and keeps its traceback — under a one-line
header naming the plugin when a plugin's own code raised it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import warnings

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


#: command name -> its module in :mod:`pflt.commands` where the two differ (otherwise the
#: module is the name with ``-`` → ``_``); lets ``pflt <command>`` import that module only
#: (tests/pflt/test_cli_lazy.py checks this table against every module's commands)
COMMAND_MODULES = {"flower-sim": "flower", "flower-outcome": "flower"}


def command_modules() -> list[str]:
    """The modules of :mod:`pflt.commands` (those whose names do not start with ``_``)."""
    import pflt.commands as commands

    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__)
                  if not m.name.startswith("_"))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``pflt`` parser with one sub-command per module of :mod:`pflt.commands`; with
    ``command`` (the sub-command the user named) only that command's module is imported —
    ``pflt verify --only X`` does not load the modules of ``run`` or ``figures`` — falling
    back to every module when the name is not a known command."""
    parser = OneLineParser(
        prog="pflt",
        description="pfl-theory: personalized federated learning algorithms, theory and "
        "numerical verification.",
    )
    parser.add_argument("--version", action="version", version=f"pfl-theory {__version__}")
    parser.add_argument("--plugin", metavar="SPEC", action="append",
                        help="import a module, .py file or package directory of your own "
                        "that registers algorithms and checks (any command, anywhere on the "
                        "line, repeatable; also PFLT_PLUGINS=a,b; see docs/extending.md)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    names = command_modules()
    if command is not None:
        module = COMMAND_MODULES.get(command, command.replace("-", "_"))
        if module in names:
            names = [module]
    for name in names:
        module = importlib.import_module(f"pflt.commands.{name}")
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
    if command is not None and len(names) == 1 and command not in sub.choices:
        return build_parser()           # the table is out of date: every module
    return parser


def take_plugin_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` without its ``--plugin SPEC`` / ``--plugin=SPEC`` (anywhere before a ``--``),
    and the specs."""
    rest, specs, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--plugin" and i + 1 < len(argv):
            specs.append(argv[i + 1])
            i += 2
            continue
        if arg.startswith("--plugin="):
            specs.append(arg[len("--plugin="):])
        else:
            rest.append(arg)
        i += 1
    return rest, specs


def named_command(argv: list[str]) -> str | None:
    """The sub-command named on the line (the first argument not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:     # no command module (nor torch) imported
        print(f"pfl-theory {__version__}")
        return 0
    argv, plugins = take_plugin_options(argv)
    command = named_command(argv)
    try:
        if plugins:
            from pfl_theory.plugins import add_plugins

            add_plugins(plugins)
        parser = build_parser(command)  # run's options list the plugins' algorithms
    except ValueError as exc:           # a plugin that does not load (PluginError)
        if os.environ.get("PFLT_DEBUG"):
            raise
        print(f"pflt{' ' + command if command else ''}: error: {one_line(exc)}",
              file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    args.argv = argv  # sub-commands may need to know which options were given explicitly
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with _one_line_warnings(args.command):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:
        if os.environ.get("PFLT_DEBUG") or not _anticipated(exc):
            _plugin_header(args.command, exc)
            raise
        print(f"pflt {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2


def _plugin_header(command: str, exc: BaseException) -> None:
    """Above the traceback of an exception raised inside a plugin's code, one line naming
    the plugin, where and what (the traceback is the plugin author's to read)."""
    if "pfl_theory.plugins" not in sys.modules:
        return
    from pfl_theory.plugins import plugin_frame

    where = plugin_frame(exc.__traceback__)
    if where is not None:
        spec, file, line, function = where
        print(f"pflt {command}: error: plugin {spec!r} raised {type(exc).__name__}: "
              f"{one_line(exc)} (in {function}, {file}:{line}); its traceback follows",
              file=sys.stderr)


#: warnings about the user's input, printed as ``pflt <command>: warning: <message>``
ONE_LINE_WARNINGS = ("DegenerateDataWarning",)


@contextlib.contextmanager
def _one_line_warnings(command: str):
    """Show :data:`ONE_LINE_WARNINGS` as one line on stderr (Python's default shows the
    file, the line number and the source line)."""
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if category.__name__ in ONE_LINE_WARNINGS:
            print(f"pflt {command}: warning: {' '.join(str(message).split())}",
                  file=sys.stderr)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = original


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
