"""``pflt --version`` imports no command module (nor torch); ``pflt <command>`` imports that
command's module only; ``verify --only`` imports only the check modules declaring a match."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pflt import cli

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    return set(out.split())


def test_version_imports_neither_torch_nor_a_command():
    code = ("import contextlib, io\nfrom pflt.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    assert main(['--version']) == 0\nassert out.getvalue().startswith('pfl-theory ')")
    loaded = _modules_after(code)
    assert "torch" not in loaded and "numpy" not in loaded
    assert not any(m.startswith("pflt.commands.") for m in loaded)


def test_a_command_imports_its_own_module_only():
    loaded = _modules_after("from pflt.cli import build_parser\nbuild_parser('formulas')")
    assert {m for m in loaded if m.startswith("pflt.commands.")} == {"pflt.commands.formulas"}
    assert "torch" not in loaded


def test_the_command_module_table_matches_every_module():
    """Each module's commands map back to it (so ``build_parser(command)`` finds them)."""
    import argparse
    import importlib

    for name in cli.command_modules():
        module = importlib.import_module(f"pflt.commands.{name}")
        if not hasattr(module, "add_parser"):
            continue
        sub = argparse.ArgumentParser().add_subparsers()
        module.add_parser(sub)
        for command in sub.choices:
            assert cli.COMMAND_MODULES.get(command, command.replace("-", "_")) == name, command
            parser = cli.build_parser(command)
            assert command in parser._subparsers._group_actions[0].choices


def test_an_unknown_command_still_gets_the_full_parser(capsys):
    with pytest.raises(SystemExit):
        cli.main(["no-such-command"])
    assert "invalid choice" in capsys.readouterr().err


def test_verify_only_imports_the_declaring_module(monkeypatch):
    import importlib

    from verification.core import runner
    from verification.core.runner import modules_declaring

    assert modules_declaring("verification.checks", ["cgpfl.local_gradient"]) == ["cgpfl_theory"]
    assert modules_declaring("verification.checks", None) is None
    assert modules_declaring("verification.checks", ["no.such.*"]) is None   # select() reports
    both = modules_declaring("verification.checks", ["pfedme.*"])
    assert "pfedme_theory" in both and "cgpfl_theory" not in both
    asked = []
    real = importlib.import_module
    monkeypatch.setattr(runner.importlib, "import_module",
                        lambda name, *a: asked.append(name) or real(name, *a))
    checks, errors = runner.load_checks(only=["cgpfl.local_gradient"])
    assert "cgpfl.local_gradient" in checks and not errors
    assert [n for n in asked if n.startswith("verification.checks.")] == \
        ["verification.checks.cgpfl_theory"]
