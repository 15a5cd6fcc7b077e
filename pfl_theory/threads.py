"""CPU thread settings.

Small batched kernels (the engine's per-client matrices, the theory checks) are *slower*
with several threads when the cores are shared: on a busy 2-core machine a tiny ``bmm``
took 10–40× longer with 2 torch threads than with 1.  The experiment commands
(``pflt verify``, ``pflt figures``) therefore default to one thread; ``PFLT_THREADS``
overrides that, and ``pflt run --threads N`` sets it for a run.

``pflt run``'s default (:func:`run_threads`) was chosen from ``benchmarks/bench_engine.py``
on this project's 2-core machine (pFedMe, MLR, R=20, K=5, |D|=20; training round, seconds,
minimum of 3; 2026-11-24):

=======  ==============  ==============  ================  ================
N        idle, 1 thread  idle, 2 threads loaded, 1 thread  loaded, 2 threads
=======  ==============  ==============  ================  ================
10       0.0108          0.0107          0.037             0.050
100      0.043           0.030           0.122             0.046
1000     0.55            0.33            0.60              0.34
10000    —               —               7.7               4.2
=======  ==============  ==============  ================  ================

(idle: load average 1.3; loaded: 3–6 from other sessions.)  The minima hide the failure
that made one thread the default: with the cores oversubscribed, a two-thread kernel waits
at every barrier for a thread the scheduler has parked — in the loaded run the engine's
per-step product (100 × [10,60]@[60,20]) fell from 40 to 0.1 GFLOP/s at 2 threads, and a
user saw a whole run take 79 s at torch's default (2 threads) against 35 s at one.  Below
``RUN_MULTI_THREAD_CLIENTS`` clients a round is tens of milliseconds of such small kernels,
so the default stays at one thread (at most 1.4× lost when idle); from there on the
kernels are large and two threads gave 1.7–1.8× idle and loaded.
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


#: from this many clients on, ``pflt run`` uses two threads by default (module doc)
RUN_MULTI_THREAD_CLIENTS = 1000


def run_threads(num_clients: int) -> int:
    """``pflt run``'s default thread count: ``PFLT_THREADS`` if set; else 1 below
    ``RUN_MULTI_THREAD_CLIENTS`` clients, else ``min(2, CPUs)`` (measured, module doc)."""
    if "PFLT_THREADS" in os.environ:
        return default_threads()
    if num_clients < RUN_MULTI_THREAD_CLIENTS:
        return 1
    return max(1, min(2, os.cpu_count() or 1))


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
