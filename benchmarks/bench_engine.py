"""pFedMe round time: batched engine vs the per-client reference loop, in one run.

Setting: seed-compatible Synthetic(0.5, 0.5), MLR, pFedMe with R=20, K=5, |D|=20 (the
paper's), S=10, float32, one torch thread (the machine's 2 cores are shared). For
N >= 1000 the generator's sizes are reduced (``size_multiplier=1``, at most 200 samples per
client) so that generating the data does not dominate; the round cost depends on R, K, |D|
and N only, not on client sizes.

Prints seconds/round for both engines, their ratio and the batched engine's achieved
FLOP/s; the last line is ``speedup_vs_reference N=100: <ratio>``.

    python benchmarks/bench_engine.py [--sizes 10 100 1000] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from algorithms import reference_loop
from algorithms.models import MLR
from algorithms.pfedme import PFedMe
from synthetic import fedprox


def time_rounds(step, state, rounds: int) -> float:
    state = step(state)  # warm-up
    start = time.perf_counter()
    for _ in range(rounds):
        state = step(state)
    return (time.perf_counter() - start) / rounds


def bench(n: int, rounds: int, ref_rounds: int) -> dict:
    small = n >= 1000
    fed = fedprox.federation(0.5, 0.5, num_clients=n, seed=0, device="cpu",
                             size_multiplier=1 if small else 5,
                             max_client_size=200 if small else None)
    model = MLR(60, 10)
    alg = PFedMe(lam=15, lr=0.005, personal_lr=0.09, inner_steps=5, local_rounds=20,
                 batch_size=20, clients_per_round=min(10, n))
    state = alg.init(fed, model, seed=0)
    batched = time_rounds(lambda s: alg.round(s, fed, model), state, rounds)
    ref = time_rounds(lambda s: reference_loop.pfedme_round(alg, s, fed, model), state, ref_rounds)
    # MLR forward+backward ≈ 3 × (2·B·d·C) FLOPs per client per gradient; R·K gradients
    flops = 3 * 2 * alg.batch_size * 60 * 10 * n * alg.local_rounds * alg.inner_steps
    return {"N": n, "batched_s": batched, "reference_s": ref, "ratio": ref / batched,
            "gflops": flops / batched / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--rounds", type=int, default=3, help="timed batched rounds")
    parser.add_argument("--ref-rounds", type=int, default=1, help="timed reference rounds")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [bench(n, args.rounds, args.ref_rounds) for n in args.sizes]
    print(f"{'N':>6} {'batched s/round':>16} {'reference s/round':>18} {'speedup':>8} {'GFLOP/s':>8}")
    for r in rows:
        print(f"{r['N']:>6} {r['batched_s']:>16.4f} {r['reference_s']:>18.4f} "
              f"{r['ratio']:>8.1f} {r['gflops']:>8.2f}")
    ref_row = next((r for r in rows if r["N"] == 100), rows[-1])
    print(f"speedup_vs_reference N={ref_row['N']}: {ref_row['ratio']:.1f}")


if __name__ == "__main__":
    main()
