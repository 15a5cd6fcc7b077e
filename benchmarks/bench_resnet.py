"""PLGU's network, ResNet-18 with GroupNorm (``--model resnet18-gn``), under FedAvg at N = 10:
seconds per round and memory.

Workload: N clients, every one training every round (``clients_per_round = N``), R local
SGD steps of |D| samples on random ``C×S×S`` images of 10 classes (the timing does not
depend on the pixel values), float32, the paper's base width 64 unless ``--width``.  A round
is :meth:`FedAvg.round` — the batched grouped-convolution forward/backward of all N clients
per step, then the server mean; no evaluation.  One warm-up round, then the median of
``--repeats`` rounds.

Memory: the parameters (N client copies of the 11.2 M scalars at width 64), and the peak
— on CUDA ``torch.cuda.max_memory_allocated`` over the timed rounds; on CPU the growth of the
process's peak resident set (``ru_maxrss``) from before the model was built (a lower bound
when an earlier peak was higher).  Prints the conditions (device, threads, load average)
and a last line ``resnet18-gn N=<n>: <seconds> s/round, peak <MiB> MiB``.

    python benchmarks/bench_resnet.py [--clients 10] [--side 32] [--batch 10]
                                      [--local-rounds 5] [--width 64] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.engine.models_resnet import ResNet18GN  # noqa: E402
from synthetic.federation import Federation  # noqa: E402


def _rss_mib() -> float:
    """The process's peak resident set so far, MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2 ** 20 if platform.system() == "Darwin" else 2 ** 10)


def images(n: int, per_client: int, side: int, channels: int, device: str) -> Federation:
    rng = np.random.RandomState(0)
    xs = [rng.randn(per_client, channels, side, side).astype(np.float32) for _ in range(n)]
    ys = [rng.randint(0, 10, per_client) for _ in range(n)]
    return Federation.from_client_arrays(xs, ys, num_classes=10, device=device,
                                         dtype=torch.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--side", type=int, default=32, help="image side S (CIFAR-10: 32)")
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10, help="mini-batch size |D|")
    ap.add_argument("--local-rounds", type=int, default=5, help="local SGD steps R per round")
    ap.add_argument("--width", type=int, default=64, help="base width (ResNet-18: 64)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    before = _rss_mib()
    fed = images(args.clients, 4 * args.batch, args.side, args.channels, args.device)
    model = ResNet18GN(args.channels, args.side, 10, width=args.width)
    alg = get_algorithm("fedavg")(local_rounds=args.local_rounds, batch_size=args.batch,
                                  clients_per_round=args.clients)
    state = alg.init(fed, model, 0)
    params = sum(v[0].numel() for v in state.models["global"].values())
    state = alg.round(state, fed, model)                         # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        state = alg.round(state, fed, model)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else _rss_mib() - before
    sec = statistics.median(times)
    print(f"device {args.device}, {args.threads} thread(s), torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"N={args.clients}, images {args.channels}x{args.side}x{args.side}, |D|={args.batch}, "
          f"R={args.local_rounds}, width {args.width}: {params:,} parameters per client, "
          f"{args.clients * params * 4 / 2 ** 20:.1f} MiB for the N client copies (float32)")
    print(f"rounds: {', '.join(f'{t:.3f}' for t in times)} s")
    print(f"resnet18-gn N={args.clients}: {sec:.3f} s/round, peak {peak:.0f} MiB"
          + (" (CUDA allocated)" if cuda else " (growth of the peak resident set)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
