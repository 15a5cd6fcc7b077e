"""pFedMe on Synthetic(0.5, 0.5) with MLR: the batched engine against a per-client loop,
training alone and with the evaluation ``pflt run`` does every round.

Workload (pFedMe's synthetic setting): R = 20 local rounds of K = 5 steps on |D| = 20
samples, λ = 15, S = 10, float32, every client trains every round; the data ``pflt run``
uses (the paper's client sizes, capped at N = 10,000 so that the features fit 1 GiB).
Evaluation: the three models (personalized, global, local), per-client accuracy and loss
on test and loss on train, with their summaries (:func:`algorithms.engine.runner.evaluation_entry`).

Baselines (:mod:`benchmarks.reference_pfedme`): one ``nn.Linear`` per client, a shuffled
``DataLoader``, ``zero_grad / backward / step`` per step, then a per-client evaluation of
the three models on both splits; each part timed two ways:

* **the baseline**, as the public pFedMe code runs it: the inner step taken by a
  ``torch.optim.Optimizer`` subclass (``pFedMeOptimizer`` there, ``PFedMeStep`` here), and
  evaluation as ``userbase.User`` — the parameters copied into the client's model, then a
  ``DataLoader`` over the client's samples (a list of ``(x, y)``) with the whole split as
  one batch, so each evaluation collates every sample;
* **optimistic**: the same step written inline under ``no_grad`` (no ``Optimizer.step``
  hooks) and one ``F.linear`` per client and split on slices of the flat tensors — no
  per-client library we know of runs this cheaply; it bounds what a rewrite of the
  per-client loop could save.

Where the loop would take too long (N > ``--ref-clients``) it runs on that many evenly
spaced clients and its times are scaled by N / that (marked ``*``).

FLOPs are what the algorithm needs, not what the engine happens to compute: a training
step is the textbook two matrix products per client — logits ``x W`` and the weight
gradient ``xᵀ g``, ``2·|D|·d·C`` each — so ``4·|D|·d·C`` per step and ``N·R·K`` steps a
round (bias, softmax and the prox update are not counted); an engine that reformulates
the step (e.g. in logit space) may do fewer, and its GFLOP/s are then textbook-equivalent.
An evaluation is ``2·d·C`` per sample per model.  Peak: the same process's ``1024×1024`` float32 matrix product at that
thread count, the best seen over the run (measured at the start and before each row).  The *floor* of a phase is its FLOPs at that peak: evaluation cannot take
less, so "evaluation ≤ 0.5 × a training round" is out of reach by arithmetic once a round
takes less than twice the evaluation floor.  Timings are the minimum of ``--repeats``
wall-clock runs, engine and baselines interleaved so they share the machine's load (the
1-minute load average is printed per row).

    python benchmarks/bench_engine.py [--sizes 10 100 1000 10000] [--threads 1 2]
                                      [--device cpu|cuda] [--repeats 3] [--ref-clients 100]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from algorithms.engine.models import MLR  # noqa: E402
from algorithms.methods.regularized.pfedme import PFedMe  # noqa: E402
from algorithms.engine.runner import evaluation_entry  # noqa: E402
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
    """GFLOP/s of a ``size³`` float32 matrix product (best of 20: under load the best run
    is the one least disturbed)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    return 2 * size ** 3 / min(wall(lambda: a @ b, device) for _ in range(20)) / 1e9


def small_bmm_rate(n: int, device: torch.device) -> float:
    """GFLOP/s of a per-client step product shape: ``n × [C, d] @ [d, |D|]``."""
    w = torch.randn(n, CLASSES, DIM, device=device)
    x = torch.randn(n, DIM, 20, device=device)
    torch.bmm(w, x)
    best = min(wall(lambda: torch.bmm(w, x), device) for _ in range(20))
    return 2 * n * CLASSES * DIM * 20 / best / 1e9


def federation(n: int, device: torch.device, cap: int | None = None):
    """The data ``pflt run --clients n`` uses (``--max-client-size auto``), or clients
    capped at ``cap`` samples."""
    cap = fedprox.auto_client_cap(n) if cap is None else cap
    return cap, fedprox.federation(0.5, 0.5, num_clients=n, seed=0, max_client_size=cap,
                                   device=device)


def flops(n: int, samples: int, alg) -> tuple[float, float]:
    """(training round, evaluation) FLOPs as the module doc counts them."""
    step = 2 * (2 * alg.batch_size * DIM * CLASSES)       # logits + weight gradient
    return n * alg.local_rounds * alg.inner_steps * step, MODELS * 2 * DIM * CLASSES * samples


def bench(n: int, fed, device: torch.device, repeats: int, ref_clients: int) -> dict:
    model = MLR(DIM, CLASSES)
    alg = PFedMe(lam=15, lr=0.005, personal_lr=0.09, inner_steps=5, local_rounds=20,
                 batch_size=20, clients_per_round=min(10, n))
    state = alg.init(fed, model, seed=0)
    state = alg.round(state, fed, model)                  # warm-up
    evaluation_entry(alg, state, fed, model)
    ids = np.unique(np.linspace(0, n - 1, min(n, ref_clients)).round().astype(int))
    scale = n / len(ids)
    ref = ReferencePFedMe(alg, fed, clients=ids)
    inline = ReferencePFedMe(alg, fed, clients=ids, optimizer_step=False)
    ref.round()                     # warm-up (of its evaluations the timed minimum is kept)
    inline.round()
    load = os.getloadavg()[0]
    t = {"train": [], "eval": [], "ref_train": [], "ref_inline": [], "ref_eval": [],
         "ref_sliced": []}
    for _ in range(repeats):                              # interleaved: same load for all
        t["train"].append(wall(lambda: alg.round(state, fed, model), device))
        t["eval"].append(wall(lambda: evaluation_entry(alg, state, fed, model), device))
        t["ref_train"].append(wall(ref.round, device) * scale)
        t["ref_inline"].append(wall(inline.round, device) * scale)
        t["ref_eval"].append(wall(ref.evaluate, device) * scale)
        t["ref_sliced"].append(wall(ref.evaluate_sliced, device) * scale)
    best = {key: min(v) for key, v in t.items()}
    samples = int(fed.train.counts.sum() + fed.test.counts.sum())
    train_flop, eval_flop = flops(n, samples, alg)
    return {"N": n, "samples": samples, "scaled": len(ids) < n, "load": load, **best,
            "train_flop": train_flop, "eval_flop": eval_flop}


def _ratios(r: dict) -> dict:
    both = r["train"] + r["eval"]
    return {"x_train": r["ref_train"] / r["train"],
            "x_inline": r["ref_inline"] / r["train"],
            "x_loader": (r["ref_train"] + r["ref_eval"]) / both,
            "x_sliced": (r["ref_inline"] + r["ref_sliced"]) / both,
            "train_gflops": r["train_flop"] / r["train"] / 1e9,
            "eval_gflops": r["eval_flop"] / r["eval"] / 1e9,
            "eval_floor": r["eval_flop"] / (r["peak"] * 1e9),
            "train_floor": r["train_flop"] / (r["peak"] * 1e9)}


def report(rows: list[dict], args, device, started, load0, load1) -> None:
    print(f"pFedMe, Synthetic(0.5,0.5), MLR d={DIM} C={CLASSES}, R=20 K=5 |D|=20, float32, "
          f"device {device}; {started:%Y-%m-%d %H:%M} UTC; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}")
    print(f"load average (1 min) {load0:.1f} at start, {load1:.1f} at end; minimum of "
          f"{args.repeats} runs; * = baselines timed on {args.ref_clients} evenly spaced "
          "clients and scaled by N/that")
    for threads in args.threads:
        r0 = next(r for r in rows if r["threads"] == threads)
        print(f"threads={threads}: 1024² matmul peak {r0['peak']:.1f} GFLOP/s; per-client "
              f"step product (100 × [10,60]@[60,20] bmm) {r0['bmm']:.1f} GFLOP/s")
    print("FLOPs: training = N·R·K·2·(2·|D|·d·C) (the two textbook products per step; "
          "GFLOP/s are textbook-equivalent if the engine computes fewer); evaluation = "
          "3 models · 2·d·C · samples; floor = FLOPs / matmul peak")
    print()
    print("Baseline: training with the inner step as a torch.optim.Optimizer (as the public "
          "code) and evaluation through full-split DataLoaders (as the public code); "
          "optimistic baseline: the step inline and evaluation on direct slices")
    print()
    print("| N | thr | load | samples | engine train s | engine eval s | eval/train "
          "| baseline train s: Optimizer | inline | baseline eval s: DataLoader | sliced "
          "| × train: baseline | optimistic | × train+eval: baseline | optimistic "
          "| train GFLOP/s (% peak) | eval GFLOP/s (% peak) | eval floor s |")
    print("|" + "---:|" * 18)
    for r in rows:
        q, star = _ratios(r), "*" if r["scaled"] else ""
        print(f"| {r['N']} | {r['threads']} | {r['load']:.1f} | {r['samples']:,} | "
              f"{r['train']:.4g} | {r['eval']:.4g} | {r['eval'] / r['train']:.2f} | "
              f"{r['ref_train']:.4g}{star} | {r['ref_inline']:.4g}{star} | "
              f"{r['ref_eval']:.4g}{star} | {r['ref_sliced']:.4g}{star} | "
              f"{q['x_train']:.1f} | {q['x_inline']:.1f} | {q['x_loader']:.1f} | "
              f"{q['x_sliced']:.1f} | {q['train_gflops']:.1f} "
              f"({100 * q['train_gflops'] / r['peak']:.0f}%) | {q['eval_gflops']:.1f} "
              f"({100 * q['eval_gflops'] / r['peak']:.0f}%) | {q['eval_floor']:.4g} |")
    r = next((r for r in rows if r["N"] == 100 and r["threads"] == 1), rows[0])
    q = _ratios(r)
    print(f"\nN={r['N']}, {r['threads']} thread(s): training only {q['x_train']:.1f}× "
          f"(baseline), {q['x_inline']:.1f}× (optimistic); with evaluation "
          f"{q['x_loader']:.1f}× (baseline), {q['x_sliced']:.1f}× (optimistic); evaluation / "
          f"training round {r['eval'] / r['train']:.2f}")
    print(f"evaluation: {r['eval_flop'] / 1e6:.0f} MFLOP in {1e3 * r['eval']:.1f} ms = "
          f"{q['eval_gflops']:.1f} GFLOP/s, {100 * q['eval_floor'] / r['eval']:.0f}% of the "
          f"{r['peak']:.0f} GFLOP/s peak; floor {1e3 * q['eval_floor']:.1f} ms, so "
          f"evaluation ≤ 0.5 × a round needs a round ≥ {2e3 * q['eval_floor']:.1f} ms")
    print(f"training: {r['train_flop'] / 1e6:.0f} MFLOP in {1e3 * r['train']:.1f} ms = "
          f"{q['train_gflops']:.1f} GFLOP/s, {100 * q['train_floor'] / r['train']:.0f}% of the "
          f"peak (floor {1e3 * q['train_floor']:.1f} ms)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (one-line error if absent)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (minimum kept)")
    parser.add_argument("--ref-clients", type=int, default=100,
                        help="run the per-client baselines on at most this many clients")
    parser.add_argument("--max-client-size", type=int, default=None,
                        help="cap every client at this many samples (default: as pflt run)")
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        raise SystemExit(f"bench_engine.py: {exc}") from None
    load0 = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc)
    previous = torch.get_num_threads()
    rates = {}
    rows = []
    try:
        for threads in args.threads:
            torch.set_num_threads(threads)
            rates[threads] = (matmul_peak(device), small_bmm_rate(100, device))
        for n in args.sizes:
            _, fed = federation(n, device, args.max_client_size)
            for threads in args.threads:
                torch.set_num_threads(threads)
                rates[threads] = (max(rates[threads][0], matmul_peak(device)), rates[threads][1])
                rows.append({"threads": threads, "bmm": rates[threads][1],
                             **bench(n, fed, device, args.repeats, args.ref_clients)})
                print(f"  done N={n} threads={threads}", file=sys.stderr, flush=True)
            del fed
    finally:
        torch.set_num_threads(previous)
    for r in rows:                      # the best peak seen at this thread count in the run
        r["peak"] = rates[r["threads"]][0]
    report(rows, args, device, started, load0, os.getloadavg()[0])


if __name__ == "__main__":
    main()
