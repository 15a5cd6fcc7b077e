"""Plugins: algorithms and checks registered from the user's own modules.

A plugin is an ordinary Python module (or a file, or a package directory) that registers
algorithms with ``@algorithms.engine.base.register("name")`` and/or verification checks with
``@verification.core.registry.check(...)`` when it is imported.  Nothing inside the
installed package is edited.  A plugin is found three ways, all loaded by the registries
(``algorithms.engine.base.registry()`` and the check loader of ``pflt verify``):

* the environment variable ``PFLT_PLUGINS``: module names or paths to ``.py`` files /
  package directories, separated by commas or ``os.pathsep`` (``:`` on Linux and macOS),
  e.g. ``PFLT_PLUGINS=my_algorithms,./checks/my_checks.py``;
* ``pflt --plugin SPEC`` (any command, repeatable, same syntax): added to ``PFLT_PLUGINS``
  of this process, so that a sweep's or Flower's workers load it too (:func:`add_plugins`);
* the entry-point groups ``pfl_theory.algorithms`` and ``pfl_theory.checks`` of installed
  distributions (``[project.entry-points."pfl_theory.algorithms"] my = "my_pkg.algos"`` in
  the plugin's own ``pyproject.toml``): each entry point's module is imported.

A plugin that cannot be imported (missing module or file, a syntax error, an exception or
a ``sys.exit`` at import, a name registered twice — a check id of a built-in check too) raises :class:`PluginError`, a ``ValueError`` whose message
is one line naming the plugin — ``pflt`` prints it as ``pflt <command>: error: …``.
docs/extending.md walks through writing one.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType, TracebackType

#: the environment variable naming plugin modules / files
ENV = "PFLT_PLUGINS"
#: entry-point groups whose modules are imported as plugins
GROUPS = ("pfl_theory.algorithms", "pfl_theory.checks")

#: spec -> module, for every plugin imported in this process
_LOADED: dict[str, ModuleType] = {}
_ENTRY_POINTS_LOADED = False


class PluginError(ValueError):
    """A plugin that cannot be loaded; the message is one line naming it."""


def split_specs(text: str | None) -> list[str]:
    """The plugin specs in ``text`` (commas or ``os.pathsep`` between them, blanks dropped)."""
    if not text:
        return []
    return [s.strip() for s in re.split(f"[,{re.escape(os.pathsep)}]", text) if s.strip()]


def plugin_specs() -> list[str]:
    """The specs named by ``PFLT_PLUGINS`` (in order, duplicates dropped)."""
    return list(dict.fromkeys(split_specs(os.environ.get(ENV))))


def add_plugins(specs: str | list[str]) -> None:
    """Add ``specs`` (``--plugin``) to ``PFLT_PLUGINS`` of this process (child processes
    inherit it) and load them now, so that a bad one fails before anything runs."""
    new = split_specs(specs) if isinstance(specs, str) else [s for x in specs
                                                             for s in split_specs(x)]
    # files as absolute paths: a worker started in another directory finds them too
    new = [str(Path(s).expanduser().resolve()) if _is_path(s) and Path(s).expanduser().exists()
           else s for s in new]
    if new:
        os.environ[ENV] = ",".join(dict.fromkeys(plugin_specs() + new))
    load_plugins()


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec or Path(spec).is_dir()


def _import_path(spec: str) -> ModuleType:
    path = Path(spec).expanduser().resolve()
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise FileNotFoundError(f"{spec} is a directory without __init__.py")
        file, name, search = init, path.name, [str(path)]
    elif path.is_file():
        file, name, search = path, path.stem, None
    else:
        raise FileNotFoundError(f"no such file or directory: {spec}")
    for module in list(sys.modules.values()):     # imported already (by a test, say)
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == file:
            return module
    if not name.isidentifier() or name in sys.modules:
        name = f"pflt_plugin_{abs(hash(str(file))):x}"
    spec_obj = importlib.util.spec_from_file_location(name, file,
                                                      submodule_search_locations=search)
    if spec_obj is None or spec_obj.loader is None:
        raise ImportError(f"cannot load {spec} as a Python module")
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[name] = module
    try:
        spec_obj.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_plugin(spec: str) -> ModuleType:
    """Import the plugin ``spec`` (a module name, a ``.py`` file or a package directory)
    once; :class:`PluginError` with a one-line reason if that fails."""
    if spec in _LOADED:
        return _LOADED[spec]
    try:
        module = _import_path(spec) if _is_path(spec) else importlib.import_module(spec)
    except (Exception, SystemExit) as exc:     # sys.exit at import: not the command's exit
        raise PluginError(f"plugin {spec!r} could not be loaded: {_reason(exc)} (named by "
                          f"--plugin or {ENV})") from exc
    _LOADED[spec] = module
    return module


def _reason(exc: BaseException) -> str:
    """``Type: message`` on one line; ``sys.exit(code) at import`` for a ``SystemExit``."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    reason = " ".join((str(exc) or type(exc).__name__).split())
    return f"{type(exc).__name__}: {reason}"


def plugin_frame(tb: TracebackType | None) -> tuple[str, str, int, str] | None:
    """``(spec, file, line, function)`` of the innermost frame of the traceback ``tb`` that
    runs code of a loaded plugin (its file, or a file inside its package directory), else
    ``None``: what ``pflt`` names in the one-line header it prints above the traceback of
    a plugin's own exception."""
    roots = []
    for spec, module in _LOADED.items():
        file = getattr(module, "__file__", None)
        if file:
            path = Path(file).resolve()
            roots.append((spec, path.parent if path.name == "__init__.py" else path))
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        file = Path(code.co_filename).resolve()
        for spec, root in roots:
            if file == root or root in file.parents:
                found = (spec, str(file), tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def load_entry_points() -> list[str]:
    """Import the modules of the entry points in :data:`GROUPS` (once per process); their
    names."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return []
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    names = []
    for group in GROUPS:
        for ep in entry_points(group=group):
            try:
                ep.load()
            except (Exception, SystemExit) as exc:
                _ENTRY_POINTS_LOADED = False
                raise PluginError(f"plugin entry point {ep.name!r} = {ep.value!r} (group "
                                  f"{group}) could not be loaded: {_reason(exc)}") from exc
            names.append(f"{group}:{ep.name}")
    return names


def load_plugins() -> list[ModuleType]:
    """Load every plugin: the entry points of :data:`GROUPS` and the specs of
    ``PFLT_PLUGINS`` (each imported once); the modules of the latter."""
    load_entry_points()
    return [load_plugin(spec) for spec in plugin_specs()]
