"""PLGU's network, ResNet-18 with GroupNorm (``--model resnet18-gn``), under FedAvg at the
paper's N = 100: CPU seconds per round and peak memory, the clients trained in chunks.

Workload: N clients, every one training every round (``clients_per_round = N``), R local
SGD steps of |D| samples on random ``C×S×S`` images of 10 classes (the timing does not
depend on the pixel values), float32, the paper's base width 64 unless ``--width``.  A round
is :meth:`FedAvg.round` — the batched grouped-convolution forward/backward of ``K`` clients
at a time (``--client-chunk K``; default: the chunk a ``--memory-budget`` in GiB allows,
:func:`algorithms.engine.chunks.chunk_for_budget`, whose default is half the available
memory), then the server mean; no evaluation.  One warm-up round, then ``--repeats``
rounds timed in process CPU time (min and median; wall time printed beside).

Memory: the parameters (N client copies of the 11.2 M scalars at width 64), and the peak
— on CUDA ``torch.cuda.max_memory_allocated`` over the timed rounds; on CPU the growth of the
process's peak resident set (``ru_maxrss``) from before the model was built (a lower bound
when an earlier peak was higher).  Prints the conditions (device, threads, load average)
and a last line ``resnet18-gn N=<n>: <seconds> s/round, peak <MiB> MiB``.

    python benchmarks/bench_resnet.py [--clients 100] [--side 32] [--batch 10]
                                      [--local-rounds 5] [--width 64] [--device cpu|cuda]
                                      [--client-chunk K | --memory-budget GIB] [--out JSON]
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
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--side", type=int, default=32, help="image side S (CIFAR-10: 32)")
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10, help="mini-batch size |D|")
    ap.add_argument("--local-rounds", type=int, default=5, help="local SGD steps R per round")
    ap.add_argument("--width", type=int, default=64, help="base width (ResNet-18: 64)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--client-chunk", type=int, default=None, help="clients trained at once")
    ap.add_argument("--memory-budget", type=float, default=None,
                    help="GiB for one chunk's training (sizes --client-chunk)")
    ap.add_argument("--out", type=Path, default=None, help="results JSON to write")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    before = _rss_mib()
    fed = images(args.clients, 4 * args.batch, args.side, args.channels, args.device)
    model = ResNet18GN(args.channels, args.side, 10, width=args.width)
    alg = get_algorithm("fedavg")(local_rounds=args.local_rounds, batch_size=args.batch,
                                  clients_per_round=args.clients)
    from algorithms.engine.chunks import chunk_for_budget
    from algorithms.engine.contract import client_chunks

    chunk = args.client_chunk or chunk_for_budget(
        model, fed, args.batch,
        None if args.memory_budget is None else int(args.memory_budget * 2 ** 30))
    state = alg.init(fed, model, 0)
    params = sum(v[0].numel() for v in state.models["global"].values())
    with client_chunks(chunk):
        state = alg.round(state, fed, model)                         # warm-up
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        cpu, wall = [], []
        for _ in range(args.repeats):
            c, t = time.process_time(), time.perf_counter()
            state = alg.round(state, fed, model)
            if cuda:
                torch.cuda.synchronize()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else _rss_mib() - before
    conditions = (f"device {args.device}, {args.threads} thread(s), torch {torch.__version__}, "
                  f"load average {os.getloadavg()[0]:.2f}")
    print(conditions)
    print(f"N={args.clients}, images {args.channels}x{args.side}x{args.side}, |D|={args.batch}, "
          f"R={args.local_rounds}, width {args.width}: {params:,} parameters per client, "
          f"{args.clients * params * 4 / 2 ** 20:.1f} MiB for the N client copies (float32); "
          f"clients trained {chunk or args.clients} at a time")
    print(f"rounds, CPU: {', '.join(f'{t:.2f}' for t in cpu)} s; wall: "
          f"{', '.join(f'{t:.2f}' for t in wall)} s")
    print(f"resnet18-gn N={args.clients}: {min(cpu):.2f} s/round CPU (median "
          f"{statistics.median(cpu):.2f}), peak {peak:.0f} MiB"
          + (" (CUDA allocated)" if cuda else " (growth of the peak resident set)"))
    if args.out:
        import datetime
        import json

        args.out.write_text(json.dumps({
            "command": "python benchmarks/bench_resnet.py " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "conditions": conditions,
            "workload": f"FedAvg round, N={args.clients} clients all training, R="
                        f"{args.local_rounds} local steps of |D|={args.batch} random "
                        f"{args.channels}x{args.side}x{args.side} images, ResNet-18-GN width "
                        f"{args.width}, float32, no evaluation",
            "client_chunk": chunk or args.clients, "parameters_per_client": params,
            "client_copies_MiB": round(args.clients * params * 4 / 2 ** 20, 1),
            "cpu_seconds_per_round": {"min": min(cpu), "median": statistics.median(cpu)},
            "cpu_s": cpu, "wall_s": wall, "peak_MiB": round(peak),
            "peak_kind": "CUDA allocated" if cuda else "growth of the peak resident set"},
            indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
