"""Generated formula mutants (verification/mutation/generated.py): the transforms, the
generation from a signature, the patching, and the kill-rate bookkeeping."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pfl_theory import ppfe
from verification.mutation import generated as G


@dataclasses.dataclass(frozen=True)
class _Terms:
    total: float
    parts: tuple
    count: int


def test_map_floats_reaches_every_float_and_keeps_ints():
    out = G.map_floats({"a": 1.5, "b": [2.0, 3], "c": _Terms(4.0, (0.5,), 7),
                        "d": np.array([1.0, 2.0])}, lambda r: 2 * r)
    assert out["a"] == 3.0 and out["b"] == [4.0, 3] and out["c"] == _Terms(8.0, (1.0,), 7)
    assert out["d"].tolist() == [2.0, 4.0]


def test_mutants_are_generated_from_the_signature_with_every_kind():
    ms = G.mutants_of("pfl_theory.ppfe_bounds", "corollary2_terms", limit=100)
    kinds = {m.kind for m in ms}
    assert kinds == {"constant", "sqrt-scope", "exponent", "dropped-factor", "swapped",
                     "log-base"}
    labels = {m.label for m in ms}
    assert {"x2", "x0.5", "n^+0.5", "n^-0.5", "num_clients=1", "n<->num_clients"} <= labels
    # the draw is fixed by the seed and capped
    again = G.mutants_of("pfl_theory.ppfe_bounds", "corollary2_terms", limit=8)
    assert [m.name for m in again] == [m.name for m in
                                       G.mutants_of("pfl_theory.ppfe_bounds",
                                                    "corollary2_terms", limit=8)]
    assert len(again) == 8


def _apply(label: str, **kw):
    m = next(m for m in G.mutants_of("pfl_theory.ppfe_bounds", "corollary2_terms", limit=100)
             if m.label == label)
    t = G.Tracker()
    return m.wrap(ppfe.corollary2_terms, t)(**kw), t


def test_each_mutant_changes_the_formula_as_named():
    kw = dict(width=2.0, depth=1, num_stages=2, n=40, num_clients=10, gamma_w=1.0, delta=0.05)
    base = ppfe.corollary2_terms(**kw)["total"]
    assert _apply("x2", **kw)[0]["total"] == pytest.approx(2 * base)
    assert _apply("n^-0.5", **kw)[0]["total"] == pytest.approx(base / math.sqrt(40))
    dropped, t = _apply("num_clients=1", **kw)
    assert dropped["total"] == pytest.approx(ppfe.corollary2_terms(**{**kw, "num_clients": 1})["total"])
    assert t.hits == 1 and t.invalid == 0
    swapped, _ = _apply("n<->num_clients", **kw)
    assert swapped["total"] == pytest.approx(
        ppfe.corollary2_terms(**{**kw, "n": 10, "num_clients": 40})["total"])
    log10, _ = _apply("log10", **kw)
    assert log10["confidence"] == pytest.approx(
        math.sqrt(math.log10(1 / 0.05) / 400), rel=1e-12)
    # a dropped factor that the formula rejects (δ = 1) is invalid, not a kill
    with pytest.raises(ValueError):
        _apply("delta=1", **kw)


def test_patched_replaces_reexports_and_restores():
    original = ppfe.corollary2_terms
    with G.patched("pfl_theory.ppfe_bounds", "corollary2_terms", lambda **k: {"total": -1.0}):
        assert ppfe.corollary2_terms()["total"] == -1.0  # the re-export in pfl_theory.ppfe
    assert ppfe.corollary2_terms is original


def test_a_result_without_floats_is_not_counted_as_mutated():
    m = next(m for m in G.mutants_of("pfl_theory.ppfe_covering", "fc_parameter_count")
             if m.label == "x2")
    t = G.Tracker()
    assert m.wrap(ppfe.fc_parameter_count, t)([3, 1]) == 4 and t.hits == 0  # an int: unchanged


def test_an_argument_exponent_mutant_of_an_int_result_is_not_counted_as_mutated():
    # result × v^{±1/2} on an int-valued formula changes nothing: not exercised (was counted
    # as a survivor that no check could ever kill)
    muts = [m for m in G.mutants_of("pfl_theory.ppfe_covering", "fc_parameter_count", limit=99)
            if m.kind == "exponent"]
    assert muts
    for m in muts:
        t = G.Tracker()
        assert m.wrap(ppfe.fc_parameter_count, t)([3, 1, 2]) == ppfe.fc_parameter_count([3, 1, 2])
        assert t.hits == 0


def test_a_log_base_mutant_counts_only_when_the_formula_calls_math_or_numpy_log():
    from pfl_theory import rates

    muts = [m for m in G.mutants_of("pfl_theory.rates", "power_exponents", limit=99)
            if m.kind == "log-base"]
    import sympy as sp

    T, N = sp.symbols("T N", positive=True)
    assert muts
    for m in muts:                   # power_exponents uses sympy's log only
        t = G.Tracker()
        m.wrap(rates.power_exponents, t)(1 / (T * N), [T, N])
        assert t.hits == 0
    m = next(m for m in G.mutants_of("pfl_theory.plgu", "clipped_log", limit=99)
             if m.kind == "log-base")
    from pfl_theory import plgu
    t = G.Tracker()
    m.wrap(plgu.clipped_log, t)(5.0)
    assert t.hits >= 1
