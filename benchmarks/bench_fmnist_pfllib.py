"""Workload W2: FedAvg and pFedMe on the real Fashion-MNIST with a CNN at N = 40, side by
side with PFLlib's own FedAvg (its ``clientAVG.train`` and ``Server.aggregate_parameters``,
its ``test_metrics`` / ``train_metrics`` for the evaluation) on the same data and an
equivalent CNN — the shape of workload PFLlib's users report as slow (PFLlib issue #253).

The network on both sides is PFLlib's ``FedAvgCNN`` (``flcore/trainmodel/models.py``: conv
5×5 → 32, ReLU, max-pool 2, conv 5×5 → 64, ReLU, max-pool 2, dense 1024 → 512, ReLU, dense
512 → 10); ours is :class:`algorithms.engine.models.CNN` with ``channels=(32, 64),
hidden=512`` (the same layers; the peer starts from our initial parameters).  Data:
``pflt run --data fmnist --clients 40``'s federation (label skew, 2 classes per client,
75/25 split), float32, CPU, one torch thread.  A round: every client (S = N = 40) takes
R = ``--local-rounds`` SGD steps on mini-batches of |D| = ``--batch`` samples (PFLlib's client
is handed the same number of batches of the same size as its one local epoch, so both do
the same arithmetic), η = 0.005 (PFLlib's default), then the server mean.  "With
evaluation" adds what each side does to evaluate every round: ours
:func:`algorithms.engine.runner.evaluation_entry` (global model: test accuracy and loss,
train loss — one pass over both splits), PFLlib's ``Server.evaluate`` body (every client:
``set_parameters``, ``test_metrics`` — accuracy and AUC over its test split —, and
``train_metrics`` over its whole training split, mini-batches of |D|).  pFedMe (K = 5 inner
steps per local round, λ = 15) is timed on our side only: PFLlib's FedAvg is the reference.

Timings: one untimed warm-up round, then ``--rounds`` rounds with ours and PFLlib's
interleaved round by round (they share the machine's load; the load average is printed),
the median of each kept.  Ratios printed: PFLlib FedAvg / ours, training alone and with
evaluation.  The profile (``torch.profiler`` over one round of each side) says which share
of each round the convolution kernels and the dense layers' matrix products take: they are
the same FLOPs on both sides, so a batched engine can only remove the rest (per-client
Python, optimiser, data loading) — at equal kernel speed the ratio is bounded by
1 / (1 − their share of PFLlib's round).  pFedMe's evaluation (three models) is timed once.

    python benchmarks/bench_fmnist_pfllib.py --pfllib ~/src/PFLlib [--data DIR]
        [--rounds 3] [--local-rounds 5] [--batch 10] [--out benchmarks/results/w2_fmnist_pfllib.json]

PFLlib is not vendored and not a dependency (``--pfllib``: a checkout's root, as
``side_by_side_pfllib.py``, whose peer set-up this reuses).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.engine.models import CNN  # noqa: E402
from algorithms.engine.runner import evaluation_entry  # noqa: E402
from side_by_side_pfllib import aggregate, make_peer, peer_modules  # noqa: E402

N, LR, CLASSES = 40, 0.005, 10
#: our parameter names → the entries of PFLlib's FedAvgCNN
OURS_TO_PEER = {"conv1.weight": "conv1.0.weight", "conv1.bias": "conv1.0.bias",
                "conv2.weight": "conv2.0.weight", "conv2.bias": "conv2.0.bias",
                "fc1.weight": "fc1.0.weight", "fc1.bias": "fc1.0.bias",
                "fc2.weight": "fc.weight", "fc2.bias": "fc.bias"}


def our_cnn() -> CNN:
    return CNN(1, 28, CLASSES, channels=(32, 64), hidden=512)


def load_peer_net(net: torch.nn.Module, params: dict) -> torch.nn.Module:
    """``net`` (a FedAvgCNN) with our row-0 parameters (dense weights transposed)."""
    state = net.state_dict()
    for k, v in params.items():
        t = v[0]
        state[OURS_TO_PEER[k]] = (t.T if k.startswith("fc") and k.endswith("weight") else t
                                  ).clone()
    net.load_state_dict(state)
    return net


def fmnist(data: str | None):
    from synthetic.sources import DataSpec, build_federation

    name = f"fmnist:{data}" if data else "fmnist"
    return build_federation(DataSpec(data=name, num_clients=N), device="cpu",
                            dtype=torch.float32)


class Peers:
    """PFLlib's FedAvg on our federation: one ``clientAVG`` per client around a FedAvgCNN."""

    def __init__(self, mods, fed, net, batch: int, steps: int):
        self.mods, self.fed, self.batch, self.steps = mods, fed, batch, steps
        self.global_net = net
        self.peers = {i: make_peer(mods["fedavg"], fed, i, copy.deepcopy(net), {},
                                   num_classes=CLASSES, batch_size=batch, lr=LR, double=False)
                      for i in range(fed.num_clients)}
        self.gen = torch.Generator().manual_seed(0)

    def _rows(self, split, i):
        o, n = int(split.offsets[i]), int(split.counts[i])
        return split.x[o:o + n].reshape(n, 1, 28, 28), split.y[o:o + n]

    def train_round(self) -> None:
        """Every client: the global model in, R mini-batches of |D| (drawn with replacement
        of batches, without within one) as its local epoch, ``clientAVG.train``; then
        ``Server.aggregate_parameters``."""
        for i, peer in self.peers.items():
            x, y = self._rows(self.fed.train, i)
            picks = [torch.randperm(len(y), generator=self.gen)[:self.batch]
                     for _ in range(self.steps)]
            peer.feed = [(x[p], y[p]) for p in picks]
            peer.set_parameters(self.global_net)
            peer.train()
        self.global_net = aggregate(self.mods, self.peers, list(self.peers), self.fed)

    def evaluate(self) -> float:
        """``Server.evaluate``'s work: every client's ``test_metrics`` and ``train_metrics``
        of the global model; returns the test accuracy."""
        correct = total = 0
        for i, peer in self.peers.items():
            peer.set_parameters(self.global_net)
            test = TensorDataset(*self._rows(self.fed.test, i))
            peer.load_test_data = lambda b=None, d=test: DataLoader(d, self.batch, shuffle=True)
            peer.feed = DataLoader(TensorDataset(*self._rows(self.fed.train, i)), self.batch,
                                   drop_last=True, shuffle=True)
            acc, num, _auc = peer.test_metrics()
            peer.train_metrics()
            correct, total = correct + acc, total + num
        return correct / total


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


#: profiler op names of the arithmetic kernels: convolutions, and the dense layers' products
CONV, MATMUL = ("conv",), ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear")


def kernel_shares(fn) -> tuple[float, float, float]:
    """(seconds, convolution share, dense-product share) of one call of ``fn`` under the
    profiler: the self CPU time of the ops whose name contains ``conv``, and of the matrix
    products (``aten::mm``, ``bmm``, ``addmm`` …), over the total self CPU time."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = timed(fn)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    conv = sum(e.self_cpu_time_total for e in events if "conv" in e.key)
    mat = sum(e.self_cpu_time_total for e in events
              if e.key.removeprefix("aten::") in MATMUL)
    return t, conv / total, mat / total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pfllib", type=Path, required=True, help="local PFLlib checkout (root)")
    ap.add_argument("--data", default=None, help="Fashion-MNIST directory (default: data home)")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up)")
    ap.add_argument("--local-rounds", type=int, default=5, help="local SGD steps R per round")
    ap.add_argument("--batch", type=int, default=10, help="mini-batch size |D| (PFLlib: 10)")
    ap.add_argument("--out", type=Path, default=None, help="results JSON to write")
    args = ap.parse_args(argv)
    if not (args.pfllib / "system" / "flcore").is_dir():
        print(f"bench_fmnist_pfllib: error: {args.pfllib} is not a PFLlib checkout "
              "(no system/flcore)", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    mods = peer_modules(args.pfllib)
    from flcore.trainmodel.models import FedAvgCNN

    fed = fmnist(args.data)
    model = our_cnn()
    common = dict(local_rounds=args.local_rounds, batch_size=args.batch, clients_per_round=N)
    fedavg = get_algorithm("fedavg")(lr=LR, **common)
    pfedme = get_algorithm("pfedme")(**common)
    states = {"fedavg": fedavg.init(fed, model, 0), "pfedme": pfedme.init(fed, model, 0)}
    peers = Peers(mods, fed, load_peer_net(FedAvgCNN(1, CLASSES, 1024),
                                           states["fedavg"].models["global"]),
                  args.batch, args.local_rounds)
    algs = {"fedavg": fedavg, "pfedme": pfedme}

    def ours_train(name):
        states[name] = algs[name].round(states[name], fed, model)

    def ours_eval(name):
        return evaluation_entry(algs[name], states[name], fed, model)

    for name in algs:                                                    # warm-up
        ours_train(name), ours_eval(name)
    peers.train_round(), peers.evaluate()
    times: dict[str, list[float]] = {k: [] for k in (
        "fedavg_train", "fedavg_eval", "pfedme_train", "pfedme_eval", "pfllib_train",
        "pfllib_eval")}
    for r in range(args.rounds):                        # interleaved round by round
        for name in algs:
            times[f"{name}_train"].append(timed(lambda: ours_train(name)))
            if name == "fedavg" or r == 0:   # pFedMe's 3 models: evaluated once (minutes)
                times[f"{name}_eval"].append(timed(lambda: ours_eval(name)))
        times["pfllib_train"].append(timed(peers.train_round))
        times["pfllib_eval"].append(timed(peers.evaluate))
    med = {k: statistics.median(v) for k, v in times.items()}
    profile = {"ours_fedavg_train": kernel_shares(lambda: ours_train("fedavg")),
               "pfllib_train": kernel_shares(peers.train_round)}
    ratio_train = med["pfllib_train"] / med["fedavg_train"]
    ratio_all = (med["pfllib_train"] + med["pfllib_eval"]) / (med["fedavg_train"]
                                                              + med["fedavg_eval"])
    conditions = (f"CPU {platform.machine()}, {os.cpu_count()} cores, "
                  f"1 torch thread, torch {torch.__version__}, load average "
                  f"{os.getloadavg()[0]:.1f}")
    print(f"Fashion-MNIST N={N}: {int(fed.train.counts.sum())} train / "
          f"{int(fed.test.counts.sum())} test samples; R={args.local_rounds}, "
          f"|D|={args.batch}, every client every round; {conditions}")
    for k, v in med.items():
        print(f"{k:>14}: {v:8.3f} s/round  ({', '.join(f'{t:.3f}' for t in times[k])})")
    for k, (sec, conv, mat) in profile.items():
        print(f"profile {k}: {sec:.3f} s, convolution kernels {100 * conv:.0f}%, dense "
              f"products {100 * mat:.0f}%")
    arithmetic = profile["pfllib_train"][1] + profile["pfllib_train"][2]
    bound = 1 / max(1e-9, 1 - arithmetic)
    print(f"convolutions and dense products take {100 * arithmetic:.0f}% of PFLlib's training "
          f"round (the same FLOPs on both sides): at equal kernel speed no engine is more "
          f"than {bound:.1f}x faster")
    print(f"ratio PFLlib FedAvg / ours: training {ratio_train:.2f}x, with evaluation "
          f"{ratio_all:.2f}x (target 10x)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "workload": "W2: FedAvg/pFedMe, Fashion-MNIST, FedAvgCNN, N=40, CPU",
            "command": "python benchmarks/bench_fmnist_pfllib.py " + " ".join(
                a for a in (argv if argv is not None else sys.argv[1:])),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "conditions": conditions, "local_rounds": args.local_rounds,
            "batch": args.batch, "rounds_timed": args.rounds,
            "seconds_per_round_median": med, "seconds_per_round": times,
            "profile_shares": {k: {"seconds": v[0], "convolution": v[1], "dense_products": v[2]}
                               for k, v in profile.items()},
            "ratio_train": ratio_train, "ratio_with_evaluation": ratio_all,
            "conv_bound": bound}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
