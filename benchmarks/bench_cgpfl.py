"""CGPFL round time on the batched engine at N ∈ {40, 400, 4000} clients, with the share of
the round spent in the server clustering (k-means++, Algorithm 1 step 3 of CGPFL, Tang, Guo,
Guo, IJCAI 2022).

Planted label-skew data (K₀ = 4, 20-dim Gaussian classes, 20–40 samples per client), MLR,
K = 4, R = 5, S = 5, |D| = 20, float32, one thread.  Each N: one warm-up round, then the
median of ``--repeats`` timed rounds; the clustering time is measured by wrapping
:func:`algorithms.methods.clustered.cgpfl.kmeans` with a timer.  Last line: ``cgpfl_round_seconds N=400: <s>``.

``--contexts K …``: seconds per CGPFL round at each number of contexts K on the federation
``pflt run --clients N`` builds (``--clients``, default 100: synthetic(0.5, 0.5), MLR,
d = 610 parameters per client), CGPFL's defaults but ``kmeans_restarts`` = ``--restarts``
(default 3, as ``pflt select-k --validation``), float32, one thread; the round state of
``--warmup`` K = 1 rounds is clustered into K contexts as ``select-k --validation`` does.
"after" is this checkout's k-means; "before" is ``pfl_theory/kmeans.py`` of the git revision
``--before`` (default 04f83e9, the one-shot k-means before the blocked distances), loaded from
git and patched into algorithms.methods.clustered.cgpfl; the two are interleaved round by round, and every
state they reach is compared bit for bit (``identical``).  Prints the date and the load
average before and after.

Usage: ``python benchmarks/bench_cgpfl.py [--repeats 3] [--sizes 40 400 4000]``,
``python benchmarks/bench_cgpfl.py --contexts 2 10 25 50 [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import algorithms.methods.clustered.cgpfl as cg
from algorithms.engine.models import build_model
from verification.experiments.cgpfl import cgpfl, planted_federation


def time_round(n: int, repeats: int) -> tuple[float, float]:
    """Median seconds per round and the median share spent in k-means."""
    pl = planted_federation(n, 4, size_range=(20, 40), seed=0, dtype=torch.float32)
    model = build_model("mlr", pl.fed)
    alg = cgpfl(4)
    spent = []
    real = cg.kmeans

    def timed(*a, **kw):
        t0 = time.perf_counter()
        out = real(*a, **kw)
        spent.append(time.perf_counter() - t0)
        return out

    cg.kmeans = timed
    try:
        state = alg.round(alg.init(pl.fed, model, 0), pl.fed, model)  # warm-up
        rounds, shares = [], []
        for _ in range(repeats):
            spent.clear()
            t0 = time.perf_counter()
            state = alg.round(state, pl.fed, model)
            rounds.append(time.perf_counter() - t0)
            shares.append(sum(spent) / rounds[-1])
    finally:
        cg.kmeans = real
    return statistics.median(rounds), statistics.median(shares)


BEFORE = "04f83e9"   # main before the blocked k-means (pfl_theory/kmeans.py one-shot)
ROOT = Path(__file__).resolve().parents[1]


def load_kmeans_at(rev: str):
    """``pfl_theory/kmeans.py`` as of git revision ``rev``, as a module (None without git)."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:pfl_theory/kmeans.py"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = f"_kmeans_at_{rev}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up
    exec(compile(src, f"{rev}:pfl_theory/kmeans.py", "exec"), module.__dict__)
    return module


def _bits_equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_bits_equal(a[k], b[k]) for k in a)
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        (a.contiguous().view(-1).view(torch.uint8) == b.contiguous().view(-1).view(torch.uint8)).all())


def time_contexts(ks, clients: int, restarts: int, rounds: int, warmup_rounds: int, before):
    """``{K: (after s/round, before s/round or None, identical)}``: medians over ``rounds``
    rounds per K, "before" and "after" interleaved round by round."""
    from algorithms.engine.base import flatten, get_algorithm
    from algorithms.methods.clustered.cgpfl import assignment_matrix, project
    from pfl_theory.kmeans import kmeans
    from synthetic.sources import DataSpec, build_federation

    fed = build_federation(DataSpec(num_clients=clients), device="cpu", dtype=torch.float32)
    model = build_model("mlr", fed)
    k1 = get_algorithm("cgpfl")(num_contexts=1, kmeans_restarts=restarts)
    state = k1.init(fed, model, 0)
    for _ in range(warmup_rounds):
        state = k1.round(state, fed, model)
    local = flatten(state.models["local"])
    impls = {"after": (cg.kmeans, cg.align_result)}
    if before is not None:
        impls["before"] = (before.kmeans, before.align_result)
    out = {}
    for k in ks:
        alg = get_algorithm("cgpfl")(num_contexts=k, kmeans_restarts=restarts)
        labels = torch.as_tensor(kmeans(local, k, restarts=restarts, seed=k).labels).long()
        ctx = project(state.models["local"], assignment_matrix(labels, k, fed.dtype))
        start = state.replace(models={**state.models, "context": ctx},
                              tensors={"assignment": labels, "num_contexts": torch.tensor(k)})
        states = dict.fromkeys(impls, start)
        times = {name: [] for name in impls}
        for t in range(rounds + 1):                      # round 0: warm-up, not timed
            for name, (km_fn, align_fn) in impls.items():
                cg.kmeans, cg.align_result = km_fn, align_fn
                try:
                    t0 = time.perf_counter()
                    states[name] = alg.round(states[name], fed, model)
                    if t:
                        times[name].append(time.perf_counter() - t0)
                finally:
                    cg.kmeans, cg.align_result = impls["after"]
        same = None
        if "before" in states:
            a, b = states["after"], states["before"]
            same = all(_bits_equal(a.models[m], b.models[m]) for m in a.models) and \
                all(_bits_equal(a.tensors[n], b.tensors[n]) for n in a.tensors)
        out[k] = (statistics.median(times["after"]),
                  statistics.median(times["before"]) if "before" in times else None, same)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per size (median)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 400, 4000],
                        help="numbers of clients N")
    parser.add_argument("--contexts", type=int, nargs="+", default=None,
                        help="instead of --sizes: s/round at each number of contexts K, "
                             "before/after (module docstring)")
    parser.add_argument("--clients", type=int, default=100, help="--contexts: clients N")
    parser.add_argument("--restarts", type=int, default=3, help="--contexts: k-means restarts")
    parser.add_argument("--rounds", type=int, default=5, help="--contexts: timed rounds per K")
    parser.add_argument("--warmup", type=int, default=3, help="--contexts: K = 1 rounds first")
    parser.add_argument("--before", default=BEFORE, help="--contexts: git revision of the "
                        "'before' k-means ('none': after only)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.contexts is not None:
        return contexts_main(args)
    results = {}
    for n in args.sizes:
        sec, share = time_round(n, args.repeats)
        results[n] = sec
        print(f"N={n:5d}: {sec:.4f} s/round, clustering {share:.1%} of the round", flush=True)
    if 400 in results:
        print(f"cgpfl_round_seconds N=400: {results[400]:.4f}")
    return 0


def contexts_main(args) -> int:
    if any(k < 1 or k > args.clients for k in args.contexts):
        raise SystemExit(f"--contexts must lie in [1, --clients = {args.clients}]")
    before = None if args.before == "none" else load_kmeans_at(args.before)
    if before is None and args.before != "none":
        print(f"(no git revision {args.before}: 'after' only)")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}; load average {os.getloadavg()[0]:.2f}; N = {args.clients}, MLR, "
          f"restarts {args.restarts}, median of {args.rounds} rounds, 1 thread", flush=True)
    res = time_contexts(args.contexts, args.clients, args.restarts, args.rounds, args.warmup, before)
    for k, (after, prev, same) in res.items():
        line = f"K={k:3d}: after {after:.4f} s/round"
        if prev is not None:
            line += f", before {prev:.4f} s/round ({prev / after:.1f}x), identical: {same}"
        print(line, flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0 if all(same is not False for _, _, same in res.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
