"""pfl_theory.plugins: specs from PFLT_PLUGINS, module names, files and package directories,
entry points, one-line errors; the registries pick plugins up."""

import sys
from types import SimpleNamespace

import pytest

ALGORITHM = '''
from dataclasses import dataclass
from algorithms.engine.base import register
from algorithms.methods.averaging.fedavg import FedAvg

@register("{name}")
@dataclass(frozen=True)
class Mine(FedAvg):
    """A FedAvg copy registered by a plugin (McMahan et al., AISTATS 2017)."""
'''


def test_split_specs_takes_commas_and_the_path_separator():
    from pfl_theory.plugins import split_specs

    assert split_specs(" a, b:c ,,") == ["a", "b", "c"]
    assert split_specs("") == split_specs(None) == []


def test_a_file_a_package_directory_and_a_module_name_register(isolated_plugins, tmp_path,
                                                                monkeypatch):
    from algorithms.engine.base import registry

    (tmp_path / "one.py").write_text(ALGORITHM.format(name="plug-one"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import algo\n")
    (tmp_path / "pkg" / "algo.py").write_text(ALGORITHM.format(name="plug-two"))
    (tmp_path / "mod_three.py").write_text(ALGORITHM.format(name="plug-three"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PFLT_PLUGINS", f"{tmp_path / 'one.py'},{tmp_path / 'pkg'}:mod_three")
    assert {"plug-one", "plug-two", "plug-three"} <= set(registry())
    registry()                                   # loaded once: no "registered twice"


@pytest.mark.parametrize("spec, source, needle", [
    ("no_such_plugin_module", None, "ModuleNotFoundError: No module named"),
    ("missing.py", None, "FileNotFoundError: no such file"),
    ("broken.py", "def f(:\n", "SyntaxError"),
    ("raises.py", "raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
    ("twice.py", ALGORITHM.format(name="fedavg"), "registered twice"),
    # sys.exit at import ended any command with its code and no message (exit 0: success)
    ("exit0.py", "import sys\nsys.exit(0)\n", "called sys.exit(0) while being imported"),
    ("exit3.py", "import sys\nsys.exit(3)\n", "called sys.exit(3) while being imported"),
    ("exitmsg.py", "raise SystemExit('bye')\n", "sys.exit('bye')"),
])
def test_a_bad_plugin_is_one_line_naming_it(isolated_plugins, tmp_path, monkeypatch, spec,
                                            source, needle):
    from algorithms.engine.base import registry

    path = tmp_path / spec if spec.endswith(".py") else spec
    if source is not None:
        path.write_text(source)
    monkeypatch.setenv("PFLT_PLUGINS", str(path))
    with pytest.raises(isolated_plugins.PluginError) as info:
        registry()
    message = str(info.value)
    assert "\n" not in message and needle in message and str(path) in message


def test_entry_points_of_both_groups_are_imported(isolated_plugins, tmp_path, monkeypatch):
    from importlib import metadata

    from algorithms.engine.base import registry

    (tmp_path / "ep_algos.py").write_text(ALGORITHM.format(name="plug-ep"))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def entry_points(group):
        seen.append(group)
        if group != "pfl_theory.algorithms":
            return []
        return [metadata.EntryPoint("mine", "ep_algos", group)]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.setattr(isolated_plugins, "_ENTRY_POINTS_LOADED", False)
    assert "plug-ep" in registry()
    assert seen == list(isolated_plugins.GROUPS)
    sys.modules.pop("ep_algos", None)


def test_a_broken_entry_point_is_one_line(isolated_plugins, monkeypatch):
    from importlib import metadata

    monkeypatch.setattr(metadata, "entry_points", lambda group: [
        metadata.EntryPoint("bad", "no_such_ep_module", group)])
    monkeypatch.setattr(isolated_plugins, "_ENTRY_POINTS_LOADED", False)
    with pytest.raises(isolated_plugins.PluginError, match="entry point 'bad'.*no_such_ep"):
        isolated_plugins.load_plugins()


def test_add_plugins_writes_absolute_file_paths_for_child_processes(isolated_plugins, tmp_path,
                                                                    monkeypatch):
    import os

    (tmp_path / "rel_plugin.py").write_text(ALGORITHM.format(name="plug-rel"))
    monkeypatch.chdir(tmp_path)
    isolated_plugins.add_plugins("rel_plugin.py")
    assert os.environ["PFLT_PLUGINS"] == str(tmp_path.resolve() / "rel_plugin.py")
    from algorithms.engine.base import registry

    assert "plug-rel" in registry()


CLASH = '''
from verification.core.registry import Outcome, check

@check("{id}", paper="mine", reference="mine", kind="identity")
def mine(ctx):
    return Outcome(holds=True)
'''


def _pfedme_checks():
    from verification.core.runner import load_checks

    checks, errors = load_checks(only="pfedme.*")
    return {k: c.fn.__module__ for k, c in checks.items() if k.startswith("pfedme.")}, errors


@pytest.mark.parametrize("plugin_first", [True, False])
def test_a_plugin_check_under_a_built_in_id_is_one_line_naming_both(
        isolated_plugins, tmp_path, monkeypatch, plugin_first):
    """It replaced the built-in check and dropped the rest of its module (a warning, exit
    0); now a one-line PluginError naming the plugin's function and the built-in module,
    whichever is imported first, and the built-in module stays whole."""
    builtin = "verification.checks.pfedme_theory"
    before, _ = _pfedme_checks() if not plugin_first else ({}, {})
    path = tmp_path / "clash.py"
    path.write_text(CLASH.format(id="pfedme.envelope_gradient"))
    monkeypatch.setenv("PFLT_PLUGINS", str(path))
    with pytest.raises(isolated_plugins.PluginError) as info:
        if plugin_first:
            isolated_plugins.load_plugins()
        else:
            _pfedme_checks()
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "pfedme.envelope_gradient" in message and builtin in message and "mine" in message
    monkeypatch.setenv("PFLT_PLUGINS", "")
    after, errors = _pfedme_checks()
    assert not errors and after["pfedme.envelope_gradient"] == builtin
    from verification.core.registry import builtin_ids

    declared = {i for i, m in builtin_ids().items() if m == builtin}
    assert len(declared) >= 3 and {i for i, m in after.items() if m == builtin} == declared
    assert all(m.startswith("verification.") for m in after.values())
    if before:
        assert after == before


def test_two_plugins_with_one_check_id_name_both(isolated_plugins, tmp_path, monkeypatch):
    """Two files with a function of the same name under one id were accepted silently (the
    second replaced the first): only the qualified name was compared."""
    for name in ("first", "second"):
        (tmp_path / f"{name}.py").write_text(CLASH.format(id="mine.same_id"))
    monkeypatch.setenv("PFLT_PLUGINS", f"{tmp_path / 'first.py'},{tmp_path / 'second.py'}")
    with pytest.raises(isolated_plugins.PluginError, match="duplicate check id 'mine.same_id'.*"
                       "second.mine and first.mine"):
        isolated_plugins.load_plugins()


@pytest.mark.parametrize("name", ["", " ", "my algo", "tab\tname", "new\nline"])
def test_register_refuses_empty_names_and_names_with_blanks(name):
    from algorithms.engine.base import _REGISTRY, register

    with pytest.raises(ValueError, match="algorithm name") as info:
        register(name)
    assert "\n" not in str(info.value) and name not in _REGISTRY
