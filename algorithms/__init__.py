"""Batched federated algorithms (all clients along a leading tensor dimension), one registry.

Every module of this package that decorates a class with ``@register("name")`` is part of
the registry; :func:`algorithms.base.registry` imports them all. See :mod:`algorithms.base`
for the contract.
"""

from algorithms.base import State, get_algorithm, register, registry  # noqa: F401
