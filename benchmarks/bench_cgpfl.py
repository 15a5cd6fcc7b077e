"""CGPFL round time on the batched engine at N ∈ {40, 400, 4000} clients, with the share of
the round spent in the server clustering (k-means++, Algorithm 1 step 3 of CGPFL, Tang, Guo,
Guo, IJCAI 2022).

Planted label-skew data (K₀ = 4, 20-dim Gaussian classes, 20–40 samples per client), MLR,
K = 4, R = 5, S = 5, |D| = 20, float32, one thread.  Each N: one warm-up round, then the
median of ``--repeats`` timed rounds; the clustering time is measured by wrapping
:func:`algorithms.cgpfl.kmeans` with a timer.  Last line: ``cgpfl_round_seconds N=400: <s>``.

Usage: ``python benchmarks/bench_cgpfl.py [--repeats 3] [--sizes 40 400 4000]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import algorithms.cgpfl as cg
from algorithms.models import build_model
from verification.experiments_cgpfl import cgpfl, planted_federation


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per size (median)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 400, 4000],
                        help="numbers of clients N")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = {}
    for n in args.sizes:
        sec, share = time_round(n, args.repeats)
        results[n] = sec
        print(f"N={n:5d}: {sec:.4f} s/round, clustering {share:.1%} of the round", flush=True)
    if 400 in results:
        print(f"cgpfl_round_seconds N=400: {results[400]:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
