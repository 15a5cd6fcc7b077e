"""The typed, documented public API: py.typed markers, annotations and docstrings on every
public function of the API modules, and API docs that render (pydoc) for every module."""

import importlib
import inspect
import pkgutil
import pydoc
from pathlib import Path

import pytest

PACKAGES = ("pfl_theory", "synthetic", "algorithms", "verification", "paper_figures", "pflt")
ROOT = Path(__file__).resolve().parents[1]

#: the modules a user programs against (theory functions, the engine, the CLI helpers)
API_MODULES = sorted(
    [f"pfl_theory.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "pfl_theory")])]
    + ["algorithms.engine.base", "algorithms.engine.models", "algorithms.engine.functional", "pflt.cli",
       "pflt.aggregate", "pflt.catalog"])


def _all_modules():
    for pkg in PACKAGES:
        yield pkg
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
            if not info.name.endswith("__main__"):
                yield info.name


def _public_functions(module):
    for name, obj in vars(module).items():
        if not name.startswith("_") and inspect.isfunction(obj) \
                and obj.__module__ == module.__name__:
            yield name, obj


@pytest.mark.parametrize("pkg", PACKAGES)
def test_every_package_ships_a_py_typed_marker(pkg):
    assert (ROOT / pkg / "py.typed").is_file()


def _annotation_gaps(fn) -> list[str]:
    sig = inspect.signature(fn)
    gaps = [p for p, prm in sig.parameters.items() if prm.annotation is inspect.Parameter.empty
            and prm.kind not in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD)]
    if sig.return_annotation is inspect.Signature.empty:
        gaps.append("return")
    return gaps


@pytest.mark.parametrize("name", API_MODULES)
def test_api_functions_are_annotated_and_documented(name):
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name} has no module docstring"
    problems = []
    for fname, fn in _public_functions(module):
        gaps = _annotation_gaps(fn)
        if gaps:
            problems.append(f"{fname}: unannotated {gaps}")
        if not (fn.__doc__ or "").strip():
            problems.append(f"{fname}: no docstring")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_annotation_check_can_fail():
    def bare(x, y=1):
        return x

    def typed(x: int, *args: int, **kw: str) -> int:
        return x

    assert _annotation_gaps(bare) == ["x", "y", "return"] and _annotation_gaps(typed) == []


@pytest.mark.parametrize("name", list(_all_modules()))
def test_api_docs_render(name):
    text = pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext)
    assert name.split(".")[-1] in text
