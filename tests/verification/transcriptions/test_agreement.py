"""verification/transcriptions/agreement.py: the relative difference and the outcome of the
transcription checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.transcriptions import agreement as A
from verification.transcriptions.agreement import Agreement, int_between, log_uniform, rel_diff


def test_rel_diff():
    assert rel_diff(2.0, 2.0) == 0.0 and rel_diff(0.0, 0.0) == 0.0
    assert rel_diff(1.0, 2.0) == 0.5
    assert math.isclose(rel_diff([1.0, 100.0], [1.0 + 1e-3, 100.0]), 1e-5)  # norm-wise
    assert rel_diff([1.0, 2.0], [1.0, 2.0, 3.0]) == math.inf       # shapes differ
    assert rel_diff(np.inf, np.inf) == 0.0 and rel_diff(np.inf, 1.0) == math.inf
    assert rel_diff(np.nan, 1.0) == math.inf


def test_draws_avoid_one_and_stay_in_range():
    rng = np.random.default_rng(0)
    xs = [log_uniform(rng, 0.5, 2.0) for _ in range(200)]
    assert all(0.5 <= x <= 2.0 and x != 1.0 for x in xs)
    ns = [int_between(rng, 2, 9) for _ in range(200)]
    assert min(ns) == 2 and max(ns) == 9


def test_outcome_holds_only_within_the_tolerance():
    a = Agreement()
    a.add("f", 1.0, 1.0 + 1e-15)
    a.add_equal("label", "i", "i")
    assert a.outcome(1e-12, 3, ["f"]).holds
    a.add("g", 1.0, 1.0 + 1e-9)
    out = a.outcome(1e-12, 3, ["f", "g"])
    assert not out.holds and "worst: g" in out.detail
    a.add_equal("label", "i", "ii")
    assert a.outcome(1e-12, 3, ["f"]).measured == math.inf


def test_relative_difference_per_named_float():
    assert A.relative_difference({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0}) == 0.0
    assert A.relative_difference({"a": 2.0}, {"a": 1.0}) == 0.5
    assert A.relative_difference(1e-3, 2e-3) == 0.5
    assert A.relative_difference(1e-3, 2e-3, floor=1.0) == pytest.approx(1e-3)
    assert A.relative_difference({"a": 1.0}, {"b": 1.0}) == float("inf")
    assert A.relative_difference(float("nan"), 1.0) == float("inf")
    assert A.relative_difference((1.0, np.array([2.0, 3.0])), (1.0, np.array([2.0, 3.0]))) == 0
    assert A.identity_outcome([1e-16, float("nan")], 1e-12, "x").holds is False
