"""Seconds to save one evaluation of a run's history after ``E`` evaluations: the full
rewrite (:meth:`algorithms.engine.runner.History.save`, what every evaluation cost before the
append-only ``history.jsonl``) against the append (:meth:`History.save_last`, what it costs
now), at N clients (an entry carries N per-client accuracies per evaluated model).

Entries like pFedMe's (3 evaluated models, ~20 scalars each, client accuracies rounded to 6
digits); E ∈ ``--evaluations``; each point the median of ``--repeats`` saves, full rewrite
and append interleaved; prints the load average.  Last line:
``append_seconds E=<max>: <s>``.

Usage: ``python benchmarks/bench_history.py [--clients 10000] [--evaluations 10 100 400]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.engine.runner import History  # noqa: E402


def entry(round_: int, n: int, rng: random.Random) -> dict:
    e: dict = {"round": round_}
    for name in ("personalized", "global", "local"):
        for key in ("accuracy", "accuracy_mean", "accuracy_low5", "accuracy_top5", "loss",
                    "train_loss"):
            e[f"{name}_{key}"] = rng.random()
        e[f"{name}_client_accuracy"] = [round(rng.random(), 6) for _ in range(n)]
    e["wall_seconds"] = 1.0
    return e


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--evaluations", type=int, nargs="+", default=[10, 100, 400])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    print(f"N = {args.clients}, load average {os.getloadavg()}")
    one = entry(1, args.clients, rng)
    append = float("nan")
    for e_count in args.evaluations:
        with tempfile.TemporaryDirectory() as out:
            hist = History({"algorithm": "pfedme"},
                           [dict(one, round=r) for r in range(1, e_count)])
            hist.save(out)
            full, append_t = [], []
            for _ in range(args.repeats):
                hist.entries.append(dict(one, round=len(hist.entries) + 1))
                t0 = time.perf_counter()
                hist.save(out)
                full.append(time.perf_counter() - t0)
                hist.entries.append(dict(one, round=len(hist.entries) + 1))
                t0 = time.perf_counter()
                hist.save_last(out)
                append_t.append(time.perf_counter() - t0)
            append = statistics.median(append_t)
            print(f"E = {e_count:5d}: full rewrite {statistics.median(full):8.3f} s, "
                  f"append {append:8.4f} s")
    print(f"append_seconds E={max(args.evaluations)}: {append:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
