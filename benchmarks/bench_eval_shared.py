"""Seconds to evaluate one shared model (FedAvg's ``global``, ``[1, ...]``) on every
client: the flat path (:func:`algorithms.engine.evaluation._evaluate_shared`, one plain product per
chunk of rows, what :func:`~algorithms.engine.evaluation.evaluate_models` now takes when every
model is shared) against the per-client blocked path it replaced (the model expanded to N
copies and applied to blocks of the automatic size — 8 rows for a shared model, since it
has no per-client parameters — and to 64-row blocks for reference).

Synthetic(0.5, 0.5) at N clients (``pflt run``'s default data), MLR or DNN, float32, one
torch thread; each timing the median of ``--repeats`` calls, paths interleaved; per-client
results of the paths compared (max abs difference printed); prints the load average.
Last line: ``speedup N=<n> <model>: <blocked auto / flat>``.

Usage: ``python benchmarks/bench_eval_shared.py [--clients 1000] [--model mlr dnn]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from algorithms.engine import evaluation  # noqa: E402
from algorithms.engine.models import build_model  # noqa: E402
from synthetic.sources import DataSpec, build_federation  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[1000])
    ap.add_argument("--model", nargs="+", default=["mlr", "dnn"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}, 1 thread")
    for n in args.clients:
        fed = build_federation(DataSpec(num_clients=n))
        split = fed.test
        for name in args.model:
            model = build_model(name, fed)
            g = model.init(1, seed=0, device=fed.device, dtype=fed.dtype)
            auto = evaluation.block_size(split.counts, split.x[0].numel() + 10, 0)
            res = {}
            for label, block in (("flat", None), (f"blocked {auto}", auto), ("blocked 64", 64)):
                res[label] = timed(lambda b=block: evaluation.evaluate_models(
                    model, {"global": g}, split, block=b)["global"], args.repeats)
            flat = res["flat"]
            for label, (sec, (acc, loss)) in res.items():
                diff = max(float((acc - flat[1][0]).abs().max()),
                           float((loss - flat[1][1]).abs().max()))
                print(f"N={n} {name} {label:>11}: {sec:.4f} s  (max |diff| vs flat {diff:.1e}, "
                      f"{split.x.shape[0]} rows)")
            print(f"speedup N={n} {name}: {res[f'blocked {auto}'][0] / flat[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
