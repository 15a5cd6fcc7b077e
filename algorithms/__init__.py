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

from algorithms.engine.base import State, get_algorithm, register, registry  # noqa: F401
from algorithms.engine.runner import run  # noqa: F401

__all__ = ["State", "get_algorithm", "register", "registry", "run"]
