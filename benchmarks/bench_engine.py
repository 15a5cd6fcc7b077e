"""pFedMe on Synthetic(0.5, 0.5) with MLR: the batched engine against a per-client loop,
training alone and with the evaluation ``pflt run`` does every round.

Workload (pFedMe's synthetic setting): R = 20 local rounds of K = 5 steps on |D| = 20
samples, λ = 15, S = 10, float32; the data ``pflt run`` uses (the paper's client sizes,
capped at N = 10,000 so that the features fit 1 GiB).  Evaluation: the three models
(personalized, global, local), per-client accuracy and loss on test and train.

Baseline: :mod:`benchmarks.reference_pfedme` — one ``nn.Linear`` per client, a shuffled
``DataLoader``, ``zero_grad / backward / step`` per step and a per-client evaluation loop,
as the public pFedMe code runs it.  Where it would take too long (N > ``--ref-clients``) it
runs on the first ``--ref-clients`` clients and its time is scaled by N / that (marked
``*``: the per-client loop's cost is linear in N).

FLOPs: a training step is two matrix products per client (logits ``wᵀxᵀ`` and the weight
gradient ``g x``), ``2·2·|D|·d·C`` each… i.e. ``4·|D|·d·C`` per step, ``N·R·K`` steps; an
evaluation is ``2·d·C`` per sample per model.  Peak: the same process's single-thread
``1024×1024`` float32 matrix product.  Timings are the minimum of ``--repeats`` wall-clock
runs, engine and baseline interleaved so they share the machine's load (printed).

    python benchmarks/bench_engine.py [--sizes 10 100 1000 10000] [--threads 1 2]
                                      [--device cpu|cuda] [--repeats 3] [--ref-clients 200]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.models import MLR  # noqa: E402
from algorithms.pfedme import PFedMe  # noqa: E402
from algorithms.runner import evaluation_entry  # noqa: E402
from reference_pfedme import ReferencePFedMe  # noqa: E402  (this folder)
from synthetic import fedprox  # noqa: E402
from synthetic.federation import resolve_device  # noqa: E402

DIM, CLASSES, MODELS = 60, 10, 3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall(fn, device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def matmul_peak(device: torch.device, size: int = 1024) -> float:
    """GFLOP/s of a ``size³`` float32 matrix product (best of 10)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    return 2 * size ** 3 / min(wall(lambda: a @ b, device) for _ in range(10)) / 1e9


def small_bmm_rate(n: int, device: torch.device) -> float:
    """GFLOP/s of the engine's per-step product shape: ``n × [C, d] @ [d, |D|]``."""
    w = torch.randn(n, CLASSES, DIM, device=device)
    x = torch.randn(n, DIM, 20, device=device)
    torch.bmm(w, x)
    best = min(wall(lambda: torch.bmm(w, x), device) for _ in range(20))
    return 2 * n * CLASSES * DIM * 20 / best / 1e9


def federation(n: int, device: torch.device):
    """The data ``pflt run --clients n`` uses (``--max-client-size auto``)."""
    cap = fedprox.auto_client_cap(n)
    return cap, fedprox.federation(0.5, 0.5, num_clients=n, seed=0, max_client_size=cap,
                                   device=device)


def bench(n: int, cap, fed, device: torch.device, repeats: int, ref_clients: int) -> dict:
    model = MLR(DIM, CLASSES)
    alg = PFedMe(lam=15, lr=0.005, personal_lr=0.09, inner_steps=5, local_rounds=20,
                 batch_size=20, clients_per_round=min(10, n))
    state = alg.init(fed, model, seed=0)
    state = alg.round(state, fed, model)                  # warm-up
    evaluation_entry(alg, state, fed, model)
    k = min(n, ref_clients)
    ref = ReferencePFedMe(alg, fed, num_clients=k)
    ref.round()
    ref.evaluate()
    t = {"train": [], "eval": [], "ref_train": [], "ref_eval": []}
    for _ in range(repeats):                              # interleaved: same load for both
        t["train"].append(wall(lambda: alg.round(state, fed, model), device))
        t["eval"].append(wall(lambda: evaluation_entry(alg, state, fed, model), device))
        t["ref_train"].append(wall(ref.round, device) * n / k)
        t["ref_eval"].append(wall(ref.evaluate, device) * n / k)
    best = {key: min(v) for key, v in t.items()}
    samples = int(fed.train.counts.sum() + fed.test.counts.sum())
    train_flop = n * alg.local_rounds * alg.inner_steps * 4 * alg.batch_size * DIM * CLASSES
    eval_flop = MODELS * 2 * samples * DIM * CLASSES
    return {"N": n, "cap": cap, "samples": samples, "scaled": k < n, **best,
            "train_gflops": train_flop / best["train"] / 1e9,
            "eval_gflops": eval_flop / best["eval"] / 1e9}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (one-line error if absent)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (minimum kept)")
    parser.add_argument("--ref-clients", type=int, default=200,
                        help="run the per-client baseline on at most this many clients")
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        parser.error(str(exc))
    load0 = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    rates = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        rates[threads] = (matmul_peak(device), small_bmm_rate(100, device))
    rows = []
    for n in args.sizes:
        cap, fed = federation(n, device)
        for threads in args.threads:
            torch.set_num_threads(threads)
            peak, bmm = rates[threads]
            rows.append({"threads": threads, "peak": peak, "bmm": bmm,
                         **bench(n, cap, fed, device, args.repeats, args.ref_clients)})
            print(f"  done N={n} threads={threads}", file=sys.stderr, flush=True)
        del fed
    load1 = os.getloadavg()
    print(f"pFedMe, Synthetic(0.5,0.5), MLR, R=20 K=5 |D|=20, float32, device {device}; "
          f"{started:%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}")
    print(f"load average (1 min) {load0[0]:.1f} at start, {load1[0]:.1f} at end; "
          f"minimum of {args.repeats} runs; * = baseline timed on {args.ref_clients} clients "
          "and scaled by N/that")
    for threads in args.threads:
        r0 = next(r for r in rows if r["threads"] == threads)
        print(f"threads={threads}: 1024² matmul peak {r0['peak']:.1f} GFLOP/s; engine-shaped "
              f"bmm (100 × [10,60]@[60,20]) {r0['bmm']:.1f} GFLOP/s")
    print()
    print("| N | thr | samples | engine train s | engine eval s | eval/train | baseline train s "
          "| baseline eval s | × train | × train+eval | train GFLOP/s (% peak) | eval GFLOP/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        star = "*" if r["scaled"] else ""
        print(f"| {r['N']} | {r['threads']} | {r['samples']:,} | {r['train']:.4f} | "
              f"{r['eval']:.4f} | {r['eval'] / r['train']:.2f} | {r['ref_train']:.3f}{star} | "
              f"{r['ref_eval']:.3f}{star} | {r['ref_train'] / r['train']:.1f} | "
              f"{(r['ref_train'] + r['ref_eval']) / (r['train'] + r['eval']):.1f} | "
              f"{r['train_gflops']:.1f} ({100 * r['train_gflops'] / r['peak']:.0f}%) | "
              f"{r['eval_gflops']:.1f} |")
    main_row = next((r for r in rows if r["N"] == 100 and r["threads"] == 1), rows[0])
    print(f"\nN={main_row['N']}, {main_row['threads']} thread: training only "
          f"{main_row['ref_train'] / main_row['train']:.1f}×, with evaluation "
          f"{(main_row['ref_train'] + main_row['ref_eval']) / (main_row['train'] + main_row['eval']):.1f}×, "
          f"evaluation / training round {main_row['eval'] / main_row['train']:.2f}")


if __name__ == "__main__":
    main()
