"""``--plugin`` / ``PFLT_PLUGINS`` through the commands: list, run --help, verify --list, and
the option anywhere on the line (examples/plugin_example.py)."""

import json
from pathlib import Path

import pytest

from pflt.cli import main, take_plugin_options

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "plugin_example.py")


def test_take_plugin_options_anywhere_before_a_double_dash():
    assert take_plugin_options(["--plugin", "a", "run", "--plugin=b", "--x", "1"]) == \
        (["run", "--x", "1"], ["a", "b"])
    assert take_plugin_options(["run", "--", "--plugin", "c"]) == \
        (["run", "--", "--plugin", "c"], [])


def test_list_and_run_help_show_the_plugins_algorithm(isolated_plugins, capsys):
    assert main(["list", "algorithms", "--json", "--plugin", EXAMPLE]) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    mine = entries["my-fedprox"]
    assert {h["name"]: h["symbol"] for h in mine["hyperparameters"]}["mu"] == "μ"
    assert "MLSys 2020" in mine["paper"]
    assert main(["--plugin", EXAMPLE, "run", "--algorithm", "my-fedprox", "--help"]) == 0
    assert "--mu" in capsys.readouterr().out


def test_verify_lists_the_plugins_check_from_the_environment(isolated_plugins, monkeypatch,
                                                             capsys):
    monkeypatch.setenv("PFLT_PLUGINS", EXAMPLE)
    assert main(["verify", "--list", "--only", "mine.*"]) == 0
    out = capsys.readouterr().out
    assert "mine.gd_strongly_convex" in out and "1 check(s)" in out


def test_without_the_plugin_its_algorithm_is_unknown(isolated_plugins, tmp_path, capsys):
    assert main(["run", "--algorithm", "my-fedprox", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    assert "my-fedprox" in capsys.readouterr().err


FAILING_PLUGIN = '''
from verification.core.registry import Outcome, bound_outcome, check


@check("mine.always_fails", paper="Test", reference="a bound below its measurement",
       kind="bound")
def always_fails(ctx):
    """measured 2 <= bound 1: FAILS."""
    return bound_outcome(2.0, 1.0)


@check("mine.always_holds", paper="Test", reference="a bound above its measurement",
       kind="bound")
def always_holds(ctx):
    """measured 1 <= bound 2: HOLDS."""
    return bound_outcome(1.0, 2.0)
'''


def test_verify_fail_on_exits_1_when_a_listed_verdict_occurs(isolated_plugins, tmp_path,
                                                            capsys):
    plugin = tmp_path / "failing_plugin.py"
    plugin.write_text(FAILING_PLUGIN)
    base = ["--plugin", str(plugin), "verify", "--quick", "--no-progress", "--out",
            str(tmp_path / "v")]
    # default: a FAILS is a finding, exit 0
    assert main(base + ["--only", "mine.*"]) == 0
    assert main(base + ["--only", "mine.*", "--fail-on", "FAILS,ERROR"]) == 1
    assert "exit 1: --fail-on ERROR,FAILS and the run has FAILS" in capsys.readouterr().out
    # the listed verdict must occur: the holding check alone exits 0, so do other verdicts
    assert main(base + ["--only", "mine.always_holds", "--fail-on", "fails"]) == 0
    assert main(base + ["--only", "mine.*", "--fail-on", "ERRATUM", "--fail-on",
                        "not_run"]) == 0
    assert main(base + ["--only", "mine.*", "--fail-on", "HOLDS"]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as bad:
        main(base + ["--only", "mine.*", "--fail-on", "FAIL"])
    assert bad.value.code == 2
    assert "unknown verdict 'FAIL'" in capsys.readouterr().err


BAD = '''
from dataclasses import dataclass
from algorithms.engine.base import register
from algorithms.methods.averaging.fedavg import FedAvg

@register("{name}")
@dataclass(frozen=True)
class Bad(FedAvg):
    """FedAvg with one broken method (McMahan et al., AISTATS 2017)."""
{body}
'''
RETURNS = "    def evaluated(self, state):\n        return {value}\n"
TINY = ["--clients", "3", "--clients-per-round", "3", "--rounds", "1", "--no-progress"]


@pytest.mark.parametrize("value, needle", [
    ("3.0", "returned float 3.0"), ("[1, 2]", "returned list [1, 2]"), ("{}", "returned dict {}"),
    ("{'global': 3.0}", "evaluated(state)['global'] is float 3.0"),
    ("{'global': {}}", "evaluated(state)['global'] is dict {}"),
    ("{'global': {'w': 1}}", "evaluated(state)['global'] is dict {'w': 1}"),
])
def test_evaluated_returning_a_non_model_is_one_line(isolated_plugins, tmp_path, capsys,
                                                     value, needle):
    """Was AttributeError in algorithms/engine/evaluation.py (a traceback)."""
    path = tmp_path / "bad_eval.py"
    path.write_text(BAD.format(name="bad-eval", body=RETURNS.format(value=value)))
    code = main(["--plugin", str(path), "run", "--algorithm", "bad-eval", *TINY,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and err.startswith("pflt run: error: algorithm 'bad-eval' (bad_eval.Bad)")
    assert needle in err


def test_a_plugins_own_exception_keeps_its_traceback_under_a_header(isolated_plugins,
                                                                     tmp_path, capsys):
    path = tmp_path / "raising.py"
    body = ("    def client_update(self, phase, model, view):\n"
            "        raise KeyError('oops in my plugin')\n")
    path.write_text(BAD.format(name="bad-update", body=body))
    with pytest.raises(KeyError, match="oops in my plugin"):    # the traceback is kept
        main(["--plugin", str(path), "run", "--algorithm", "bad-update", *TINY,
              "--out", str(tmp_path / "o")])
    header = capsys.readouterr().err.strip().splitlines()[-1]
    assert header == (f"pflt run: error: plugin {str(path)!r} raised KeyError: 'oops in my "
                      f"plugin' (in client_update, {path}:11); its traceback follows")


def test_a_package_bug_gets_no_plugin_header(isolated_plugins, tmp_path, capsys, monkeypatch):
    """The header names a plugin only when the plugin's code raised (mutation: printing it
    for any loaded plugin fails here)."""
    import algorithms.engine.runner as runner

    def broken(*args, **kwargs):
        raise KeyError("a bug of the package")
    monkeypatch.setattr(runner, "evaluation_entry", broken)
    with pytest.raises(KeyError):
        main(["--plugin", EXAMPLE, "run", "--algorithm", "fedavg", *TINY,
              "--out", str(tmp_path / "o")])
    assert "plugin" not in capsys.readouterr().err
