"""Help text that says every default: :func:`state_defaults`."""

from __future__ import annotations

import argparse
from typing import Iterable


def state_defaults(actions: Iterable[argparse.Action]) -> None:
    """Append ``(default: X)`` to every option whose help does not say its default yet; an
    option without help gets ``default: X`` as its help. ``None``/``False`` defaults mean
    "not given" and are left alone."""
    for action in actions:
        if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            continue
        if action.help and "default" in action.help:
            continue
        shown = " ".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) \
            else action.default
        action.help = f"{action.help} (default: {shown})" if action.help else f"default: {shown}"
