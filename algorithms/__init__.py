"""Batched federated algorithms (all clients along a leading tensor dimension), one registry.

Every module of this package that decorates a class with ``@register("name")`` is part of
the registry; :func:`algorithms.base.registry` imports them all. See :mod:`algorithms.base`
and :mod:`algorithms.contract` for the contract (an algorithm is its client/server split;
``round`` is derived from it, and the Flower adapter ``algorithms.flower`` runs the same
functions).
"""

from algorithms.base import State, get_algorithm, register, registry  # noqa: F401
