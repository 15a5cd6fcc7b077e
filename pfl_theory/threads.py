"""CPU thread settings.

Small batched kernels (the engine's per-client matrices, the theory checks) are *slower*
with several threads when the cores are shared: on a busy 2-core machine a tiny ``bmm``
took 10–40× longer with 2 torch threads than with 1.  The experiment commands
(``pflt verify``, ``pflt figures``, ``pflt select-k``) therefore default to one thread; ``PFLT_THREADS``
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
10000    6.99            4.02            7.7               4.2
=======  ==============  ==============  ================  ================

(idle: load average 1.3; loaded: 3–6 from other sessions.)  The minima hide the failure
that decides the default: with the cores oversubscribed, a two-thread kernel waits at every
barrier for a thread the scheduler has parked.  In the loaded run the engine's per-step
product (100 × [10,60]@[60,20]) fell from 40 to 0.1 GFLOP/s at 2 threads; a user saw a
run take 79 s at torch's default (2 threads) against 35 s at one; and ``pflt run
--clients 10000 --rounds 3`` at load average ~3 took 33–80 s per round with 2 threads
against 5.7 s with one (idle, before pFedMe's client tiles: 4.1 s with 2 threads).  Two threads gain at most 1.4–1.8×
when the machine is idle and lose 6–14× when it is shared, so ``pflt run`` defaults to
one thread at every N (:func:`run_threads`); ``--threads 2`` / ``PFLT_THREADS=2`` is worth
it on a machine of one's own from ~1000 clients on.

Since the table above, pFedMe's inner solve runs in logit space and, with T > 1 torch
threads, its client tiles run on T one-thread workers (``algorithms.engine.steps.map_tiles``), so
its *training* no longer waits at per-operation barriers: benchmarks/bench_engine.py on
2026-11-24 20:48 UTC (load 1.1–2.8) gave an N = 10,000 training round of 1.07 s at one
thread and 0.58 s at two, evaluation 0.54 s and 0.32 s.  Evaluation and the other
algorithms still use torch's intra-op threads, and with a test run beside it ``pflt run
--clients 10000 --threads 2`` took 2.3–6.3 s per round against 1.7 s at one thread — so the
default stays one thread.

**One policy for the CLI and the Python API.**  ``algorithms.engine.runner.run`` (and everything
built on it: the validation runs of ``select-k``/``select-stages``, the examples, the
README's snippets) runs its rounds at :func:`api_threads` ``(threads)``: its ``threads=``
argument if given, else ``PFLT_THREADS``, else 1 — the same default as ``pflt run`` — and
restores torch's setting afterwards (:func:`torch_threads`), so a caller's own
``torch.set_num_threads`` outside the run is left as it was.  To run at torch's own default
(all cores), pass ``threads=torch.get_num_threads()`` or set ``PFLT_THREADS``.  Before this
policy the API ran at torch's default of 2 threads on this machine: README snippet 1
(pFedMe, MLR, N = 100) took 0.5–1.9 s for 2 rounds against 0.1–0.2 s at one thread,
snippet 2 (pFedMe on a 60-32-10 ``nn.Module``, N = 20) 4.5–6.4 s against 1.2–1.3 s
(2026-11-26 16:25 UTC, load average 1.7–2.6; an earlier user measured 36.6 s against 8.0 s
under heavier load).  With this policy, interleaved with the previous code at load 3–6
(16:27 UTC, 2-round probes, torch's default 2 threads, no ``PFLT_THREADS``): snippet 1
0.2 s against 2.9–3.9 s, snippet 2 2.1–2.2 s against 8.9–28.6 s.  Snippet 1 in full (50
rounds, evaluation every 5th, ``out_dir``; 17:16–17:23 UTC, load 9–13, interleaved): 150.5 s
and 212.9 s before, 15.3 s and 14.3 s now, against 16.7 s and 9.7 s for the same run through
``pflt run --algorithm pfedme --model mlr --clients 100 --rounds 50 --eval-every 5``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import os
import sys
from typing import Any, Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def default_threads() -> int:
    """``PFLT_THREADS`` if set (an integer >= 1), else 1."""
    value = os.environ.get("PFLT_THREADS", "1")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"PFLT_THREADS must be an integer >= 1, got {value!r}") from None
    if n < 1:
        raise ValueError(f"PFLT_THREADS must be an integer >= 1, got {value!r}")
    cap = max_threads()
    if n > cap:   # torch aborts (segmentation fault) on 100,000
        raise ValueError(f"PFLT_THREADS={n} is more than {cap} (4 × the {os.cpu_count() or 1} "
                         "CPUs here)")
    return n


def max_threads() -> int:
    """The most threads accepted: 4 × the CPUs (at least 4), as ``pflt run --threads``."""
    return max(4 * (os.cpu_count() or 1), 4)


def run_threads(num_clients: int) -> int:
    """``pflt run``'s default thread count: ``PFLT_THREADS`` if set, else 1 at every
    ``num_clients`` (measured, module doc: a second thread gains ≤ 1.8× idle and loses
    6–14× on a shared machine)."""
    if int(num_clients) < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    return default_threads()


def set_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads to ``n`` (default :func:`default_threads`)."""
    import torch

    n = default_threads() if n is None else n
    torch.set_num_threads(n)
    return n


def set_torch_threads_when_imported(n: int | None = None) -> None:
    """:func:`set_torch_threads` now if torch is imported, else the moment it is (a one-shot
    import hook): a command whose work may or may not need torch (``pflt verify --only``
    of a sympy-only check) keeps the thread policy without importing torch itself.  ``n``
    (default :func:`default_threads`) is checked now."""
    n = default_threads() if n is None else n
    if "torch" in sys.modules:
        set_torch_threads(n)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(n))


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds ``torch`` through the other finders and sets its threads once it has run;
    removes itself at the first ``import torch``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module, n = spec.loader.exec_module, self.n

        def exec_module(module: Any) -> None:
            run_module(module)
            set_torch_threads(n)        # torch is complete in sys.modules now
        spec.loader.exec_module = exec_module
        return spec


def api_threads(threads: int | None = None) -> int:
    """The torch thread count of a run started from Python: ``threads`` if given (an
    integer >= 1), else :func:`default_threads` (``PFLT_THREADS``, else 1) — the policy of
    ``pflt run`` (module doc)."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    return threads


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[int]:
    """Run the ``with`` block at ``n`` torch intra-op threads, restoring the previous
    count afterwards (also on an exception)."""
    import torch

    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def single_threaded(fn: F) -> F:
    """Run ``fn`` with one torch thread (restored afterwards): the engine's small batched
    ops are several times slower with 2 threads on a shared 2-core machine."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)
    return wrapper  # type: ignore[return-value]


def single_blas_thread() -> contextlib.AbstractContextManager:
    """Context manager limiting numpy's BLAS to one thread (no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(1)
