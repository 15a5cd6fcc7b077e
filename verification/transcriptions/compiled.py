"""Transcribed formulas by name, evaluated in float64: sympy expressions lambdified once.

Used by the transcription modules (:mod:`verification.transcriptions.pfedme`,
:mod:`verification.transcriptions.cgpfl`) so that each one only writes its formulas.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import sympy as sp


class Compiled:
    """``expressions`` (name → sympy expression), each lambdified to numpy on first use with
    its free symbols, sorted by name, as arguments."""

    def __init__(self, expressions: Mapping[str, sp.Expr]):
        self.expressions = dict(expressions)
        self._fns: dict[str, tuple[tuple[str, ...], Any]] = {}

    def _compiled(self, name: str) -> tuple[tuple[str, ...], Any]:
        if name not in self._fns:
            expr = self.expressions[name]
            args = sorted(expr.free_symbols, key=lambda s: s.name)
            self._fns[name] = (tuple(s.name for s in args), sp.lambdify(args, expr, "numpy"))
        return self._fns[name]

    def arguments(self, name: str) -> tuple[str, ...]:
        """The argument names of formula ``name`` (its free symbols, sorted)."""
        return self._compiled(name)[0]

    def evaluate(self, name: str, **values: Any) -> np.ndarray:
        """Formula ``name`` in float64 at ``values`` (scalars or arrays, broadcast); values for
        symbols the formula does not use are ignored; a missing one is a ``KeyError``."""
        names, fn = self._compiled(name)
        missing = [n for n in names if n not in values]
        if missing:
            raise KeyError(f"{name} needs {missing}")
        args = [np.asarray(values[n], dtype=np.float64) for n in names]
        return np.asarray(fn(*args), dtype=np.float64) + np.zeros(np.broadcast(*args).shape)
