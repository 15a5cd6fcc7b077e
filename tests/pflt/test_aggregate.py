"""pflt.aggregate: the headline model of each algorithm (class attribute, fallback rule)."""

from __future__ import annotations

from algorithms.engine.base import get_algorithm
from pflt import aggregate
from pflt.aggregate import headline_model


def test_headline_fallback_rule_on_real_algorithms():
    assert headline_model("fedavg", ["global"]) == "global"
    assert headline_model("pfedme", ["personalized", "global", "local"]) == "personalized"
    assert headline_model("perfedavg", ["personalized", "global"]) == "personalized"
    assert headline_model("ifca", ["cluster"]) == "cluster"
    assert headline_model("not-registered", ["a", "b"]) is None


def test_headline_class_attribute_wins(monkeypatch):
    cls = get_algorithm("ditto")
    monkeypatch.setattr(cls, "headline_model", "global", raising=False)
    aggregate._headline.cache_clear()
    try:
        assert headline_model("ditto", ["personalized", "global"]) == "global"
        # an attribute naming a model the run did not evaluate falls back to the rule
        assert headline_model("ditto", ["personalized"]) == "personalized"
    finally:
        aggregate._headline.cache_clear()
