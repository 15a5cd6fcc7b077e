"""``pflt --version`` imports no command module (nor torch); ``pflt <command>`` imports that
command's module only; ``verify --only`` imports only the check modules declaring a match;
``pflt --help``, every ``pflt <command> --help``, ``pflt list algorithms``, ``pflt list
checks``, ``pflt formulas`` and ``pflt compare`` import no torch (the registries' metadata
come from the user cache, :mod:`pflt.catalog_cache`, once it holds them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pflt import cli

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True,
                         env=env or {**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    return set(out.split())


def _pflt(argv: list[str], env: dict[str, str]) -> tuple[str, set[str]]:
    """``pflt ARGV`` in a fresh interpreter: its standard output and the modules it loaded."""
    code = ("import contextlib, io, sys\nfrom pflt.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n        code = main(%r)\n"
            "    except SystemExit as exc:\n        code = exc.code\n"
            "assert code == 0, code\n"
            "print(out.getvalue())\nprint('\\0' + ' '.join(sys.modules))" % (argv,))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, (argv, done.stderr[-2000:])
    text, _, modules = done.stdout.rpartition("\0")
    return text, set(modules.split())


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """An environment whose user cache holds the catalogue, built by a first ``pflt list
    --json`` (which imports the registries); what that first command printed, per topic."""
    import json

    home = tmp_path_factory.mktemp("user_cache")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(home)}
    env.pop("PFLT_PLUGINS", None)
    text, loaded = _pflt(["list", "--json"], env)
    assert "torch" in loaded                                  # the registries were asked
    assert sorted(p.name.split("-")[0] for p in (home / "pfl-theory" / "catalog").iterdir()) \
        == ["algorithms", "checks", "datasets", "figures", "models"]
    return env, json.loads(text)


@pytest.mark.parametrize("topic", ["algorithms", "checks", "datasets", "models", "figures"])
def test_list_reads_the_cache_without_torch_and_prints_what_the_registry_says(warm, topic):
    import json

    env, cold = warm
    text, loaded = _pflt(["list", topic, "--json"], env)
    assert "torch" not in loaded and "numpy" not in loaded
    assert json.loads(text) == cold[topic]


def test_list_of_everything_imports_no_torch(warm):
    env, _ = warm
    text, loaded = _pflt(["list"], env)
    assert "# algorithms (" in text and "# figures (" in text
    assert "torch" not in loaded and "numpy" not in loaded


def test_every_help_imports_no_torch(warm):
    """``pflt --help`` and ``pflt <command> --help`` for every command (``run --algorithm
    X --help`` too): no torch, no numpy."""
    env, _ = warm
    out = subprocess.run([sys.executable, "-c", "from pflt.cli import build_parser\n"
                          "print(*build_parser()._subparsers._group_actions[0].choices)"],
                         capture_output=True, text=True, cwd=ROOT, env=env, check=True).stdout
    commands = out.split()
    assert {"run", "list", "verify", "compare", "formulas"} <= set(commands)
    heavy = {}
    for argv in [["--help"], ["run", "--algorithm", "cgpfl", "--help"],
                 *([c, "--help"] for c in commands)]:
        loaded = _pflt(argv, env)[1]
        if {"torch", "numpy"} & loaded:
            heavy[" ".join(argv)] = sorted({"torch", "numpy"} & loaded)
    assert not heavy


def test_formulas_imports_neither_torch_nor_numpy(warm):
    env, _ = warm
    for argv in (["formulas"], ["formulas", "--section", "B.6"], ["formulas", "--markdown"]):
        text, loaded = _pflt(argv, env)
        assert "formula(s)" in text or text.startswith("#")
        assert "torch" not in loaded and "numpy" not in loaded, argv


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


def test_compare_imports_no_torch(warm, tmp_path):
    """``pflt compare`` reads the histories (:mod:`algorithms.engine.run_files`) and the
    headline models (the catalogue) without the engine; it draws with matplotlib, so numpy
    is loaded."""
    from pflt.cli import main

    env, _ = warm
    tiny = ["run", "--algorithm", "fedavg", "--clients", "4", "--clients-per-round", "2",
            "--local-rounds", "1", "--max-client-size", "20", "--no-progress", "--rounds", "2"]
    for seed in (0, 1):
        assert main([*tiny, "--seed", str(seed), "--out", str(tmp_path / f"s{seed}")]) == 0
    text, loaded = _pflt(["compare", str(tmp_path / "s0"), str(tmp_path / "s1"),
                          "--out", str(tmp_path / "cmp")], env)
    assert "global" in text and (tmp_path / "cmp").is_dir()
    assert "torch" not in loaded and "algorithms.engine.base" not in loaded


def test_the_algorithms_package_imports_torch_on_first_use_of_its_public_names():
    loaded = _modules_after("import algorithms.engine.run_files")
    assert "torch" not in loaded and "algorithms.engine.base" not in loaded
    loaded = _modules_after("from algorithms import State, get_algorithm, register, registry, "
                            "run\nimport algorithms\nassert run.__module__ == "
                            "'algorithms.engine.runner'\nassert {'State', 'run'} <= "
                            "set(dir(algorithms))")
    assert "algorithms.engine.runner" in loaded


@pytest.mark.parametrize("check, needs_torch", [("pfedme.transcription_headline_rates", False),
                                                ("cgpfl.local_gradient", True)])
def test_verify_only_imports_torch_only_for_a_check_that_needs_it(warm, tmp_path, check,
                                                                  needs_torch):
    """A sympy check runs without torch (no ``--device``: no device scope); a torch check
    still gets the thread policy (``PFLT_THREADS``), set the moment torch is imported, and
    results.json reports it."""
    env, _ = warm
    code = ("import contextlib, io, json, sys\nfrom pflt.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['verify', '--only', {check!r}, '--seeds', '1', '--quick', "
            f"'--no-progress', '--out', {str(tmp_path)!r}]) == 0\n"
            "torch = sys.modules.get('torch')\n"
            f"env = json.load(open({str(tmp_path / 'results.json')!r}))['environment']\n"
            "print(torch and torch.get_num_threads(), env['torch_threads'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**env, "PFLT_THREADS": "3"})
    assert done.returncode == 0, done.stderr[-2000:]
    # 3 threads: not torch's default on this 2-core machine, so the policy is what set it
    assert done.stdout.split() == (["3", "3"] if needs_torch else ["None", "None"])


def test_verify_list_reads_the_catalogue_and_prints_what_the_modules_say(warm, tmp_path):
    env, _ = warm
    cold_text, cold_loaded = _pflt(["verify", "--list"], {**env, "XDG_CACHE_HOME": str(tmp_path)})
    text, loaded = _pflt(["verify", "--list"], env)
    assert "torch" in cold_loaded and "torch" not in loaded
    assert text == cold_text and "check(s)" in text
