"""The benchmark scripts are not a package: load them by path (each puts its own folder and
the repository root on ``sys.path`` for its imports)."""

import importlib.util
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def load_script():
    def load(name: str):
        if str(FOLDER) not in sys.path:
            sys.path.insert(0, str(FOLDER))
        spec = importlib.util.spec_from_file_location(f"bench_{name}", FOLDER / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load
