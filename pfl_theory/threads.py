"""CPU thread settings.

Small batched kernels (the engine's per-client matrices, the theory checks) are *slower*
with several threads when the cores are shared: on a busy 2-core machine a tiny ``bmm``
took 10–40× longer with 2 torch threads than with 1.  The experiment commands
(``pflt verify``, ``pflt figures``) therefore default to one thread; ``PFLT_THREADS``
overrides that, and ``pflt run --threads N`` sets it for a run.
"""

from __future__ import annotations

import contextlib
import os


def default_threads() -> int:
    """``PFLT_THREADS`` if set (an integer >= 1), else 1."""
    value = os.environ.get("PFLT_THREADS", "1")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"PFLT_THREADS must be an integer >= 1, got {value!r}") from None
    if n < 1:
        raise ValueError(f"PFLT_THREADS must be an integer >= 1, got {value!r}")
    return n


def set_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads to ``n`` (default :func:`default_threads`)."""
    import torch

    n = default_threads() if n is None else n
    torch.set_num_threads(n)
    return n


def single_blas_thread() -> contextlib.AbstractContextManager:
    """Context manager limiting numpy's BLAS to one thread (no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(1)
