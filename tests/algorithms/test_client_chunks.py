"""Tests of the engine's client chunks (algorithms/engine/contract.py ``client_chunks``,
``chunked_updates``): a round run a few clients at a time gives the state of the unchunked
round bit for bit, for every registered algorithm (the contract battery's small case) and
for the CNN; the chunks really are smaller calls."""

import pytest
import torch

from algorithms.engine import contract
from algorithms.engine.base import registry
from algorithms.engine.contract import client_chunks
from algorithms.testing import _model, _rounds, _same, build, planted


@pytest.mark.parametrize("name", sorted(registry()))
@pytest.mark.parametrize("size", [1, 4])
def test_chunked_rounds_equal_unchunked_bit_for_bit(name, size):
    alg = build(registry()[name])
    fed = planted(None)
    model = _model(8, None, fed)
    whole = _rounds(alg, fed, model, 2, 3)
    with client_chunks(size):
        chunked = _rounds(alg, fed, model, 2, 3)
    _same(chunked, whole, f"{name}: chunks of {size} against all clients at once")


@pytest.mark.parametrize("name", ["fedavg", "pfedme", "ditto"])
def test_chunked_cnn_rounds_equal_unchunked(name):
    alg = build(registry()[name])
    fed = planted("cnn")
    model = _model(8, "cnn", fed)
    whole = _rounds(alg, fed, model, 2, 1)
    with client_chunks(2):
        chunked = _rounds(alg, fed, model, 2, 1)
    _same(chunked, whole, f"{name} with the CNN: chunks of 2 against all at once")


def test_client_update_sees_one_chunk_at_a_time(monkeypatch):
    """With chunks of 2 of 6 clients, ``client_update`` is called with 2 participants at a
    time (the comparison above would pass trivially if chunking were ignored)."""
    alg = build(registry()["fedavg"], clients_per_round=6)
    fed = planted(None)
    model = _model(8, None, fed)
    seen = []
    real = type(alg).client_update
    monkeypatch.setattr(type(alg), "client_update",
                        lambda self, phase, m, view: seen.append(view.clients.numel())
                        or real(self, phase, m, view))
    state = alg.init(fed, model, 0)
    with client_chunks(2):
        alg.round(state, fed, model)
    assert seen == [2, 2, 2]
    seen.clear()
    alg.round(state, fed, model)
    assert seen == [6]


def test_a_wrong_chunk_assembly_is_caught(monkeypatch):
    """If the chunks' uploads were stacked in the wrong order the states would differ."""
    alg = build(registry()["fedavg"], clients_per_round=6)
    fed = planted(None)
    model = _model(8, None, fed)
    whole = _rounds(alg, fed, model, 1, 0)
    real = contract._Stack.add
    monkeypatch.setattr(contract._Stack, "add", lambda self, tree: real(
        self, {k: ({n: v.flip(0) for n, v in t.items()} if isinstance(t, dict) else t.flip(0))
               for k, t in tree.items()}))
    with client_chunks(4):
        chunked = _rounds(alg, fed, model, 1, 0)
    with pytest.raises(AssertionError):
        _same(chunked, whole, "flipped")


def test_bad_chunk_sizes_are_refused():
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="positive integer"):
            with client_chunks(bad):
                pass
    assert contract.CLIENT_CHUNK.get() is None
