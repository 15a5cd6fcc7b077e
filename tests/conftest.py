"""Shared test configuration: one torch thread (the CI machine has 2 shared cores and
multi-threaded small ops are slower under contention), hypothesis profile without deadlines."""

import torch
from hypothesis import settings

torch.set_num_threads(1)
settings.register_profile("pflt", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("pflt")


import pytest  # noqa: E402


@pytest.fixture
def isolated_plugins(monkeypatch):
    """Plugins loaded inside a test leave nothing behind: the algorithm and check
    registries, the loaded-plugin cache, ``sys.modules`` and ``PFLT_PLUGINS`` are restored."""
    import sys

    from algorithms.engine import base
    from pfl_theory import plugins
    from verification.core import registry

    algorithms, checks = dict(base._REGISTRY), dict(registry._REGISTRY)
    loaded = dict(plugins._LOADED)
    monkeypatch.setenv(plugins.ENV, "")     # restored (to unset) after the test, even when
    yield plugins                           # `pflt --plugin` wrote to os.environ directly
    for spec, module in list(plugins._LOADED.items()):
        if spec not in loaded:
            for name in [n for n in sys.modules if n == module.__name__
                         or n.startswith(module.__name__ + ".")]:
                sys.modules.pop(name, None)
    # entries registered during the test by modules outside the package (the package's own
    # modules stay imported, so their entries must stay too)
    for name, cls in list(base._REGISTRY.items()):
        if name not in algorithms and not cls.__module__.startswith("algorithms."):
            del base._REGISTRY[name]
    for name, chk in list(registry._REGISTRY.items()):
        if name not in checks and not chk.fn.__module__.startswith("verification."):
            del registry._REGISTRY[name]
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


#: test folders whose results hang on floating-point rounding (BLAS kernels, convex solvers,
#: generators at extreme parameters); `.ci/run` runs them a second time with other CPU
#: kernels (ATEN_CPU_CAPABILITY=default, OPENBLAS_CORETYPE=Sandybridge) so a platform
#: dependence shows in CI before a user on another CPU meets it (issue 37)
NUMERICS_FOLDERS = ("synthetic", "pfl_theory", "verification/worst_case")


def pytest_collection_modifyitems(config, items):
    root = config.rootpath / "tests"
    for item in items:
        rel = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if any(rel.startswith(folder + "/") for folder in NUMERICS_FOLDERS):
            item.add_marker(pytest.mark.numerics)


@pytest.fixture
def real_format_data():
    """``make(root, name)`` of tests/verification/experiments/real_format_files.py: a small
    dataset in its real file format and the registry entry pinning it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent / "verification" / "experiments" / "real_format_files.py"
    spec = importlib.util.spec_from_file_location("real_format_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make
