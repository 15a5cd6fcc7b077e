"""Seconds per round at scale, split the way ``pflt run`` spends them: ``train`` (the round
itself: the server's draws — also timed on their own as ``draws`` — the client updates, the
aggregation and the runner's finiteness check of the new state), ``eval`` (the evaluation
entry: every evaluated model on every client's test and train split, the summaries and the
per-client accuracy vectors) and ``other`` (appending the entry to ``history.jsonl`` /
``history.csv``), as :func:`algorithms.engine.runner.run` does them every evaluated round.

The data are those of ``pflt run --clients N`` (Synthetic(0.5, 0.5), ``--max-client-size
auto``), the model MLR, one torch thread, float32.  Printed: the date (UTC), the 1-minute load
average at every round (the machine may be shared: compare only runs that were interleaved),
each round's split and the process's peak RSS (``ru_maxrss``, data included, in GiB:
:mod:`paper_figures.units`).  ``--json PATH`` also writes the rows (peak RSS in bytes) with the
date, commit and machine: ``--json benchmarks/results/bench_scale.json`` is what the
documentation's benchmark page shows (``python -m paper_figures.docs_pages``).

    python benchmarks/bench_scale.py [--clients 100000] [--clients-per-round 1000]
                                     [--algorithm pfedme] [--rounds 3] [--eval-every 1]
                                     [--json benchmarks/results/bench_scale.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.engine.models import MLR  # noqa: E402
from algorithms.engine.runner import History, _play_round, evaluation_entry  # noqa: E402
from paper_figures.units import format_bytes, peak_rss_bytes  # noqa: E402
from synthetic import fedprox  # noqa: E402


def hyperparameters(pairs: list[str]) -> dict:
    """``["a=1", "b=0.5", "c=x"]`` → ``{"a": 1, "b": 0.5, "c": "x"}`` (int, float, else str)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"bench_scale.py: --set wants NAME=VALUE, got {pair!r}")
        for kind in (int, float, str):
            try:
                out[name] = kind(value)
                break
            except ValueError:
                continue
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100_000)
    parser.add_argument("--clients-per-round", type=int, default=1000)
    parser.add_argument("--algorithm", default="pfedme")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--eval-every", type=int, default=1,
                        help="evaluate after rounds divisible by this (and the last)")
    parser.add_argument("--max-client-size", type=int, default=None,
                        help="cap every client at this many samples (default: as pflt run)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="another hyper-parameter of the algorithm (e.g. "
                             "train_clients=sampled); repeatable")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the rows and conditions as JSON (peak RSS in bytes)")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _bench(args)
    finally:
        torch.set_num_threads(threads)


def _bench(args) -> int:
    started = datetime.datetime.now(datetime.timezone.utc)
    n = args.clients
    cap = fedprox.auto_client_cap(n) if args.max_client_size is None else args.max_client_size
    t0 = time.perf_counter()
    fed = fedprox.federation(0.5, 0.5, num_clients=n, seed=0, max_client_size=cap,
                             device="cpu")
    built = time.perf_counter() - t0
    model = MLR(fed.feature_shape[0], fed.num_classes)
    alg = get_algorithm(args.algorithm)(clients_per_round=args.clients_per_round,
                                        **hyperparameters(args.set))
    state = alg.init(fed, model, 0)
    history = History({})
    title = (f"{args.algorithm} {' '.join(args.set)}, Synthetic(0.5,0.5), MLR, N={n}, "
             f"S={args.clients_per_round}, max client size {cap}, 1 torch thread, float32, "
             f"cpu; data built in {built:.1f} s")
    print(f"{title}; {started:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}")
    rows: list[dict] = []
    print("| round | load 1m | train s | (draws s) | eval s | other s | total s | peak RSS GiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.rounds):
            load = os.getloadavg()[0]
            a = time.perf_counter()
            alg.first_phase(state, fed, model)           # the draws alone (the round redoes them)
            b = time.perf_counter()
            state = _play_round(alg, state, fed, model, history, None)
            c = time.perf_counter()
            evaluated = state.round % args.eval_every == 0 or state.round == args.rounds
            if evaluated:
                history.entries.append(evaluation_entry(alg, state, fed, model))
            d = time.perf_counter()
            if evaluated:
                history.save_last(out)
            e = time.perf_counter()
            rows.append({"round": state.round, "load": round(load, 2), "train_s": c - b,
                         "draws_s": b - a, "eval_s": d - c, "other_s": e - d,
                         "total_s": e - b, "peak_rss_bytes": peak_rss_bytes()})
            print(f"| {state.round} | {load:.2f} | {c - b:.3f} | {b - a:.3f} | "
                  f"{d - c:.3f} | {e - d:.3f} | {e - b:.3f} | "
                  f"{peak_rss_bytes() / 2 ** 30:.2f} |", flush=True)
    print(f"load average (1 min) at the end {os.getloadavg()[0]:.2f}; "
          f"peak RSS {format_bytes(peak_rss_bytes())}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"environment": {
            "date": f"{started:%Y-%m-%d %H:%M} UTC", "commit": _commit(),
            "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}, 1 torch thread",
            "load": f"{os.getloadavg()[0]:.2f} at the end"},
            "setting": title, "rows": rows}, indent=2) + "\n")
    return 0


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[1])
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
