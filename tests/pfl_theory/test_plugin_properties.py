"""Properties of the plugin loader (pfl_theory.plugins) over any file content, any
``sys.exit`` argument and any name: a plugin either loads or raises a one-line
``PluginError`` naming it — never a ``SystemExit`` ending the command, never another
exception type, never a message over several lines."""

import string

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

#: pieces a plugin file is made of (the valid ones, the broken ones, the hostile ones)
PIECES = st.one_of(
    st.text(max_size=60),                                             # any text at all
    st.sampled_from(["x = 1", "def f(:", "import no_such_module_xyz", "raise ValueError('v')",
                     "raise RuntimeError('a\\nb\\n')", "raise KeyError()", "1/0",
                     "import sys", "from algorithms.engine.base import register"]),
    st.one_of(st.none(), st.integers(-300, 300), st.text(max_size=20))
      .map(lambda code: f"import sys\nsys.exit({code!r})"),           # any sys.exit
    st.text(string.printable, max_size=20)                            # any algorithm name
      .map(lambda name: "from algorithms.engine.base import register\n"
                        f"register({name!r})"),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(PIECES, max_size=4), stem=st.text(
    string.ascii_letters + string.digits + "_- .", min_size=1, max_size=12))
def test_any_plugin_file_loads_or_is_one_line_naming_it(isolated_plugins, tmp_path_factory,
                                                        lines, stem):
    path = tmp_path_factory.mktemp("plug") / f"{stem.strip() or 'p'}.py"
    path.write_text("\n".join(lines) + "\n")
    try:
        isolated_plugins.load_plugin(str(path))
    except isolated_plugins.PluginError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
    # anything else (SystemExit included) propagates and fails the property
    finally:
        isolated_plugins._LOADED.pop(str(path), None)


@settings(max_examples=40, deadline=None)
@given(name=st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s),
       as_path=st.booleans())
def test_any_missing_spec_is_one_line_naming_it(name, as_path):
    """Module names and paths that exist nowhere (any characters after a prefix that no
    installed module has, so that no real module is imported): a PluginError, one line,
    naming the spec; never another exception type."""
    from pfl_theory import plugins

    spec = f"/nonexistent-pflt/{name}.py" if as_path else f"pflt_no_such_{name}"
    with pytest.raises(plugins.PluginError) as info:
        plugins.load_plugin(spec)
    assert "\n" not in str(info.value) and repr(spec) in str(info.value)


@pytest.mark.parametrize("code", [0, 1, 3, None, "message"])
def test_pflt_with_an_exiting_plugin_is_exit_2_one_line(isolated_plugins, tmp_path, capsys,
                                                        code):
    from pflt.cli import main

    path = tmp_path / "exits.py"
    path.write_text(f"import sys\nsys.exit({code!r})\n")
    assert main(["--plugin", str(path), "list"]) == 2      # was `code` (0: success), silent
    err = capsys.readouterr().err.strip()
    assert err.startswith("pflt list: error: plugin") and "\n" not in err
    assert f"sys.exit({code!r})" in err
