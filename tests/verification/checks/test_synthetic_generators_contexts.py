"""The planted-context check holds at two seeds and FAILS on realistic mutants of
synthetic/contexts.py's source."""

from __future__ import annotations

import inspect
import sys
import types

import pytest

from synthetic import contexts
from verification.core.registry import Verdict, load_all, run_check


def _verdict(seed=0):
    return run_check(load_all()["synthetic.contexts_planted_moments"], size="quick",
                     seed=seed).verdict


@pytest.mark.parametrize("seed", [0, 1])
def test_holds_on_the_real_generators(seed):
    assert _verdict(seed) is Verdict.HOLDS


def _mutate(monkeypatch, attr, old, new):
    src = inspect.getsource(contexts)
    assert src.count(old) == 1, old
    mutant = types.ModuleType(contexts.__name__ + "_mutant")
    monkeypatch.setitem(sys.modules, mutant.__name__, mutant)  # dataclasses look it up
    exec(compile(src.replace(old, new), contexts.__file__, "exec"), mutant.__dict__)
    monkeypatch.setattr(contexts, attr, getattr(mutant, attr))


@pytest.mark.parametrize("attr,old,new", [
    ("classification_contexts", "** -0.6  # sd", "** -0.3  # sd"),  # exponent off by ½ (Σ^{-0.6})
    ("classification_contexts", "w + tau * rng.normal(size=w.shape)",
     "w + 2 * tau * rng.normal(size=w.shape)"),
    ("classification_contexts", "ys.append(np.argmax(x @ w_i + b_i, axis=1)",
     "ys.append(np.argmax(x @ w + b_i, axis=1)"),  # labels from the context model
    ("classification_contexts", "tuple((sep * rng.normal(size=(dim, c))",
     "tuple((np.sqrt(sep) * rng.normal(size=(dim, c))"),
    ("classification_contexts", "rng.normal(0.0, np.sqrt(beta))",
     "rng.normal(0.0, beta)"),  # β read as a standard deviation
    ("regression_contexts", "x @ w_i + noise * rng.normal", "x @ w_i + 2 * noise * rng.normal"),
    ("regression_contexts", "centres[assign[i]] + tau * rng", "centres[assign[i]] + rng"),
    ("regression_contexts", "centres = tuple(sep * rng", "centres = tuple(sep / 2 * rng"),
    # issue 41: the planted vectors' separation and spread were read by no check
    ("planted_model_vectors", "centres *= sep / gaps[np.triu_indices(k, 1)].min()",
     "centres *= sep / gaps[np.triu_indices(k, 1)].mean()"),  # mean distance, not the minimum
    ("planted_model_vectors", "centres[assign] + noise * rng.normal",
     "centres[assign] + np.sqrt(noise) * rng.normal"),
])
def test_a_wrong_context_generator_fails(monkeypatch, attr, old, new):
    _mutate(monkeypatch, attr, old, new)
    assert _verdict() is Verdict.FAILS
