"""verification/transcriptions/compiled.py: named sympy formulas evaluated in float64."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from verification.transcriptions.compiled import Compiled

x, y = sp.symbols("x y", positive=True)
F = Compiled({"ratio": x / y, "const": sp.Integer(3)})


def test_arguments_are_the_sorted_free_symbols():
    assert F.arguments("ratio") == ("x", "y") and F.arguments("const") == ()


def test_evaluate_broadcasts_ignores_extra_values_and_names_missing_ones():
    assert F.evaluate("ratio", x=6.0, y=[2.0, 3.0], z=9.0).tolist() == [3.0, 2.0]
    assert F.evaluate("const").dtype == np.float64 and float(F.evaluate("const")) == 3.0
    with pytest.raises(KeyError, match=r"needs \['y'\]"):
        F.evaluate("ratio", x=1.0)
