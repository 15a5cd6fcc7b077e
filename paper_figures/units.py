"""Units, fixed once: memory is measured in bytes and shown in binary units (KiB, MiB, GiB).

Linux's ``ru_maxrss`` is in KiB (1024 bytes); a figure computed as KiB / 10⁶ and labelled
"GB" is off by 2.4 % (1,576,596 KiB is 1.61 GB or 1.50 GiB, not "1.58 GB"). Every generated
number of memory goes through :func:`peak_rss_bytes` and :func:`format_bytes`.
"""

from __future__ import annotations

import resource
import sys

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far, in bytes (``ru_maxrss`` is KiB on Linux,
    bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def format_bytes(n: float, digits: int = 2) -> str:
    """``n`` bytes in the largest binary unit that keeps the number ≥ 1: ``1.50 GiB``."""
    if n < 0:
        raise ValueError(f"a size in bytes must be >= 0, got {n}")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.{digits}f} {_UNITS[unit]}"
