"""One-step mutations of a method's function, for showing that an oracle check can fail.

Each wraps the real function (``monkeypatch.setattr(module, name, summed(real))``) and
changes exactly one thing the paper fixes; ``*.engine_equals_oracle`` must then FAIL
(``tests/verification/oracles/``). A plugin author can use them on their own method.
"""

from __future__ import annotations

from typing import Callable


def summed(real: Callable) -> Callable:
    """A server mean over the P uploads (``real(params, ...)`` with params ``{key: [P, ...]}``)
    turned into their sum — the paper averages, the mutant sums."""
    def wrapped(params, *a, **k):
        out = real(params, *a, **k)
        n = next(iter(params.values())).shape[0] if params else 1
        return {key: v * n for key, v in out.items()}
    return wrapped


def scaled_lr(real: Callable, factor: float = 1.01) -> Callable:
    """An SGD routine ``real(model, params, x, y, lr, ...)`` run with ``lr × factor``."""
    return lambda model, params, x, y, lr, *a, **k: real(model, params, x, y, lr * factor, *a, **k)
