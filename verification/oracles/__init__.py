"""Independent per-client oracles of the registered algorithms (one module per family) and
their registry (:mod:`verification.oracles.registry`); :mod:`verification.checks.engine_oracles`
imports every family so that each oracle's identity check is registered."""

from verification.oracles.registry import Oracle, oracles, register_oracle  # noqa: F401

__all__ = ["Oracle", "oracles", "register_oracle"]
