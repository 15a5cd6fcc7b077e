"""What the phases of a run exchange, counted: :func:`counting`.

A phase sends each participant the server models it receives
(:func:`algorithms.engine.contract.sent_models`: every server model unless the phase names
them with ``send=``) and its row of ``phase.payload``, and receives its ``upload``; mini-batch
indices are the client's own draws and are not counted, nor ``phase.info`` (a few plain
values). Counted in tensor entries ("numbers") and bytes (entries × element size), summed
over the participants, per round (``ClientView.round``; an algorithm's initialisation
exchange, e.g. IFCA's cluster estimates, counts in round 0 with the first round).

The engine looks for a meter only through :data:`METER` (a context variable, ``None`` unless a
caller counts), so counting costs nothing when nobody asks.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator

import torch


def entries(tree) -> tuple[int, int]:
    """``(numbers, bytes)`` of the tensors of a nested dict (or one tensor)."""
    if isinstance(tree, torch.Tensor):
        return tree.numel(), tree.numel() * tree.element_size()
    if isinstance(tree, dict):
        counted = [entries(v) for v in tree.values()]
        return sum(c[0] for c in counted), sum(c[1] for c in counted)
    return 0, 0


@dataclass
class Meter:
    """Numbers and bytes sent down to and up from the clients, per round."""

    down: dict[int, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    up: dict[int, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def sent(self, round_: int, server: dict, payload: dict, participants: int) -> None:
        """Each participant receives every sent server model (stored once, ``[1, …]``) and
        its own payload row."""
        models = entries(server)
        rows = entries(payload)
        self.down[round_][0] += participants * models[0] + rows[0]
        self.down[round_][1] += participants * models[1] + rows[1]

    def received(self, round_: int, upload: dict) -> None:
        numbers, size = entries(upload)
        self.up[round_][0] += numbers
        self.up[round_][1] += size

    def per_round(self) -> dict[str, float]:
        """Mean numbers and bytes per round, down and up, over the rounds counted."""
        rounds = sorted(set(self.down) | set(self.up))
        if not rounds:
            return {}
        n = len(rounds)
        return {"down_numbers": sum(self.down[r][0] for r in rounds) / n,
                "down_bytes": sum(self.down[r][1] for r in rounds) / n,
                "up_numbers": sum(self.up[r][0] for r in rounds) / n,
                "up_bytes": sum(self.up[r][1] for r in rounds) / n, "rounds": n}


#: the meter of the run in progress, if someone counts (:func:`counting`)
METER: ContextVar[Meter | None] = ContextVar("pfl_exchange_meter", default=None)


@contextlib.contextmanager
def counting() -> Iterator[Meter]:
    """Count every phase the engine runs inside the block."""
    meter = Meter()
    token = METER.set(meter)
    try:
        yield meter
    finally:
        METER.reset(token)
