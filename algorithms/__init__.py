"""Batched federated algorithms (all clients along a leading tensor dimension), one registry.

Layout by role:

* :mod:`algorithms.engine` — the contract, registry, runner, evaluation, checkpoints, models;
* :mod:`algorithms.methods` — the registered methods, one sub-package per family;
* :mod:`algorithms.flower` — the Flower adapter (runs the same client and server functions);
* :mod:`algorithms.reference_loop` — the client-by-client reference loop;
* :mod:`algorithms.testing` — the contract battery for new (plugin) algorithms.

Every method module that decorates a class with ``@register("name")`` is part of the
registry; :func:`registry` imports them all. The public surface is this module:
``from algorithms import get_algorithm, register, run, State``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from algorithms.engine.base import State, get_algorithm, register, registry  # noqa: F401
    from algorithms.engine.runner import run  # noqa: F401

__all__ = ["State", "get_algorithm", "register", "registry", "run"]

#: public name -> the module defining it, imported on first use (PEP 562): importing a
#: torch-free part of the package (``algorithms.engine.run_files``, read by ``pflt compare``)
#: does not import torch
_DEFINED_IN = {"State": "algorithms.engine.base", "get_algorithm": "algorithms.engine.base",
               "register": "algorithms.engine.base", "registry": "algorithms.engine.base",
               "run": "algorithms.engine.runner"}


def __getattr__(name: str) -> Any:
    if name in _DEFINED_IN:
        value = getattr(importlib.import_module(_DEFINED_IN[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'algorithms' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
