"""algorithms/ laid out by role (issue 36): the engine, the method families, Flower beside
them; one public surface; families independent of each other, enforced by import-linter."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("averaging", "regularized", "clustered", "decoupled", "prototypes", "sam", "ppfe")


def test_the_top_level_holds_at_most_20_modules_and_the_roles():
    top = sorted(p.name for p in (ROOT / "algorithms").iterdir()
                 if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    assert len(top) <= 20, top
    assert {"engine", "methods", "flower"} <= set(top)
    assert sorted(p.name for p in (ROOT / "algorithms" / "methods").iterdir()
                  if p.is_dir() and (p / "__init__.py").exists()) == sorted(FAMILIES)


def test_the_public_surface():
    import algorithms
    from algorithms import State, get_algorithm, register, registry, run  # noqa: F401
    from algorithms.engine.runner import run as engine_run

    assert run is engine_run and set(algorithms.__all__) >= {"get_algorithm", "register", "run"}
    reg = registry()
    assert len(reg) >= 34
    # every registered method lives in exactly one family
    for name, cls in reg.items():
        if cls.__module__.startswith("algorithms."):
            parts = cls.__module__.split(".")
            assert parts[1] == "methods" and parts[2] in FAMILIES, (name, cls.__module__)


def _lint(tree: Path) -> subprocess.CompletedProcess:
    families = ", ".join(f'"algorithms.methods.{f}"' for f in FAMILIES)
    (tree / "pyproject.toml").write_text(textwrap.dedent(f"""
        [tool.importlinter]
        root_packages = ["algorithms", "pfl_theory", "synthetic"]
        include_external_packages = false

        [[tool.importlinter.contracts]]
        name = "families"
        type = "independence"
        modules = [{families}]

        [[tool.importlinter.contracts]]
        name = "engine"
        type = "forbidden"
        source_modules = ["algorithms.engine"]
        forbidden_modules = ["algorithms.methods"]
    """))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c",
                           "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())"],
                          cwd=tree, capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_a_cross_family_import_or_an_engine_import_of_a_method_breaks_the_contract(tmp_path):
    pytest.importorskip("importlinter")
    for pkg in ("algorithms", "pfl_theory", "synthetic"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg,
                        ignore=shutil.ignore_patterns("__pycache__"))
    assert _lint(tmp_path).returncode == 0
    fedavg = tmp_path / "algorithms" / "methods" / "averaging" / "fedavg.py"
    original = fedavg.read_text()
    fedavg.write_text(original + "\nimport algorithms.methods.sam.sam  # noqa\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout.upper()
    fedavg.write_text(original)
    runner = tmp_path / "algorithms" / "engine" / "runner.py"
    runner.write_text(runner.read_text() + "\nimport algorithms.methods.ppfe.ppfe  # noqa\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout.upper()
