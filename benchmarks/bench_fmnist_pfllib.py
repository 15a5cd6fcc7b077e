"""Workload W2: FedAvg and pFedMe on the real Fashion-MNIST with PFLlib's CNN at N = 40 —
ours against a plain per-client ``nn.Module`` loop (PFLlib's way of training, written here)
and, given a checkout (``--pfllib``), PFLlib's own clients; beside the FLOP floor.

The network on every side is PFLlib's ``FedAvgCNN`` (conv 5×5 → 32, ReLU, max-pool 2,
conv 5×5 → 64, ReLU, max-pool 2, dense 1024 → 512, ReLU, dense 512 → 10; 582,026
parameters); ours is :class:`algorithms.engine.models.CNN` with ``channels=(32, 64),
hidden=512``.  Data: ``pflt run --data fmnist --clients 40``'s federation, float32, CPU.
A round: every client takes R = ``--local-rounds`` steps on mini-batches of |D| =
``--batch`` samples held in memory, η = 0.005; pFedMe K = 5 inner steps, λ = 15,
η_p = 0.01, μ = 0.001 (PFLlib's ``pFedMeOptimizer``), the server mean weighted by samples
(β = 1).  Sides:

* ``ours_fedavg`` / ``ours_pfedme``: the engine's ``round``;
* ``loop_fedavg`` / ``loop_pfedme``: one ``nn.Module`` per client, its mini-batches sliced
  from in-memory tensors, ``zero_grad / backward / step`` (``torch.optim.SGD``; pFedMe's
  inner step and local-model update written inline, as PFLlib's ``pFedMeOptimizer.step``
  and ``clientpFedMe.train`` compute them), then the weighted mean — what PFLlib does with
  its data loaders taken out;
* ``pfllib_fedavg`` / ``pfllib_pfedme`` (with ``--pfllib``): PFLlib's ``clientAVG`` /
  ``clientpFedMe`` fed the same in-memory batches, ``Server.aggregate_parameters``.

Evaluation (``--eval-rounds`` of the rounds): ours :func:`algorithms.engine.runner.evaluation_entry`
(the evaluated models — FedAvg: the global one; pFedMe: personalized, global, local — test
accuracy and loss, train loss); a loop side evaluates the same models client by client on
both splits (``no_grad``, mini-batches of 1000), PFLlib's its ``test_metrics`` /
``train_metrics``.

Measurement (as the peers are measured): each side lives in its own long-lived worker
process (one torch thread), set up and warmed by one untimed round (and evaluation, when
more than one is timed); the rounds are then
interleaved across the sides (the order rotated each round), each side's round timed in
**process CPU time** (``time.process_time`` in the worker), with its minor page faults
(``ru_minflt``: memory freshly mapped and zeroed by the kernel) and wall time; min and
median over ``--rounds``; the 1-minute load average before and after.  FLOP floor: the
textbook FLOPs of a training round (forward ``2·MACs``; backward ``2×`` that, conv1 ``1×``:
its input needs no gradient) and of an evaluation, at the best GFLOP/s of a 1024³ float32
matrix product in a worker (one thread).

    python benchmarks/bench_fmnist_pfllib.py [--pfllib DIR] [--data DIR] [--rounds 5]
        [--eval-rounds 2] [--sides ours_fedavg loop_fedavg ...] [--out benchmarks/results/w2_fmnist_pfllib.json]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

N, LR, CLASSES, SIDE = 40, 0.005, 10, 28
PFEDME = dict(lam=15.0, personal_lr=0.01, inner_steps=5, code_l2=0.001, beta=1.0,
              aggregation="weighted")
#: our parameter names → the entries of PFLlib's FedAvgCNN (and of the loop's module)
OURS_TO_PEER = {"conv1.weight": "conv1.0.weight", "conv1.bias": "conv1.0.bias",
                "conv2.weight": "conv2.0.weight", "conv2.bias": "conv2.0.bias",
                "fc1.weight": "fc1.0.weight", "fc1.bias": "fc1.0.bias",
                "fc2.weight": "fc.weight", "fc2.bias": "fc.bias"}
SIDES = ("ours_fedavg", "ours_pfedme", "loop_fedavg", "loop_pfedme", "pfllib_fedavg",
         "pfllib_pfedme")


def our_cnn():
    from algorithms.engine.models import CNN

    return CNN(1, SIDE, CLASSES, channels=(32, 64), hidden=512)


def fmnist(data: str | None):
    import torch
    from synthetic.sources import DataSpec, build_federation

    name = f"fmnist:{data}" if data else "fmnist"
    return build_federation(DataSpec(data=name, num_clients=N), device="cpu",
                            dtype=torch.float32)


def round_flops(local_rounds: int, batch: int, inner: int = 1) -> tuple[float, float]:
    """(training FLOPs of a round, FLOPs of one model's forward per sample): 2 per
    multiply-add; backward twice the forward (conv1: once, its input needs no gradient)."""
    c1, c2, hidden = 32, 64, 512
    s1, s2 = SIDE - 4, (SIDE - 4) // 2 - 4
    conv1 = c1 * 25 * s1 * s1
    conv2 = c2 * c1 * 25 * s2 * s2
    dense = 1024 * hidden + hidden * CLASSES
    forward = 2 * (conv1 + conv2 + dense)
    step = forward + 2 * conv1 + 2 * 2 * (conv2 + dense)
    return float(N * local_rounds * inner * batch * step), float(forward)


def peak_gflops() -> float:
    import torch

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(8):
        t = time.process_time()
        a @ b
        best = min(best, time.process_time() - t)
    return 2 * 1024 ** 3 / best / 1e9


# ---- the sides ------------------------------------------------------------------------

class Ours:
    def __init__(self, name, fed, args):
        from algorithms.engine.base import get_algorithm

        self.fed, self.model = fed, our_cnn()
        common = dict(local_rounds=args.local_rounds, batch_size=args.batch, clients_per_round=N)
        self.alg = get_algorithm("fedavg")(lr=LR, **common) if name == "fedavg" else \
            get_algorithm("pfedme")(lr=LR, **PFEDME, **common)
        self.state = self.alg.init(fed, self.model, 0)

    def train(self):
        self.state = self.alg.round(self.state, self.fed, self.model)

    def evaluate(self):
        from algorithms.engine.runner import evaluation_entry

        evaluation_entry(self.alg, self.state, self.fed, self.model)


def fedavg_cnn():
    """The loop's network: PFLlib's FedAvgCNN layout (same entry names)."""
    from torch import nn

    class FedAvgCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(inplace=True),
                                       nn.MaxPool2d(2))
            self.conv2 = nn.Sequential(nn.Conv2d(32, 64, 5), nn.ReLU(inplace=True),
                                       nn.MaxPool2d(2))
            self.fc1 = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(inplace=True))
            self.fc = nn.Linear(512, CLASSES)

        def forward(self, x):
            return self.fc(self.fc1(self.conv2(self.conv1(x)).flatten(1)))
    return FedAvgCNN()


def load_net(net, params: dict):
    """``net`` with our row-0 parameters (dense weights transposed)."""
    state = net.state_dict()
    for k, v in params.items():
        t = v[0]
        state[OURS_TO_PEER[k]] = (t.T if k.startswith("fc") and k.endswith("weight") else t
                                  ).clone()
    net.load_state_dict(state)
    return net


class Clients:
    """Per-client data sliced once into in-memory tensors, and fresh mini-batches."""

    def __init__(self, fed, args):
        import torch

        self.fed, self.args = fed, args
        self.gen = torch.Generator().manual_seed(0)
        self.counts = [int(c) for c in fed.train.counts]
        self.weights = [c / sum(self.counts) for c in self.counts]

    def rows(self, split, i):
        o, n = int(split.offsets[i]), int(split.counts[i])
        return split.x[o:o + n].reshape(n, 1, SIDE, SIDE), split.y[o:o + n]

    def batches(self, i):
        import torch

        x, y = self.rows(self.fed.train, i)
        picks = [torch.randperm(len(y), generator=self.gen)[:self.args.batch]
                 for _ in range(self.args.local_rounds)]
        return [(x[p], y[p]) for p in picks]


class Loop(Clients):
    """The plain per-client loop (module docstring)."""

    def __init__(self, name, fed, args, start: dict):
        import torch

        super().__init__(fed, args)
        self.name = name
        self.global_net = load_net(fedavg_cnn(), start)
        self.nets = [copy.deepcopy(self.global_net) for _ in range(N)]
        self.locals = [[p.detach().clone() for p in net.parameters()] for net in self.nets]
        self.loss = torch.nn.CrossEntropyLoss()

    def _set(self, i):
        import torch

        with torch.no_grad():
            for p, g in zip(self.nets[i].parameters(), self.global_net.parameters()):
                p.copy_(g)
            for p, g in zip(self.locals[i], self.global_net.parameters()):
                p.copy_(g)

    def train(self):
        import torch

        for i, net in enumerate(self.nets):
            self._set(i)
            if self.name == "fedavg":
                opt = torch.optim.SGD(net.parameters(), lr=LR)
                for x, y in self.batches(i):
                    opt.zero_grad()
                    self.loss(net(x), y).backward()
                    opt.step()
            else:
                self._pfedme(net, self.locals[i], self.batches(i))
        with torch.no_grad():               # the server: weighted mean of the uploads
            uploads = self.nets if self.name == "fedavg" else None
            for j, p in enumerate(self.global_net.parameters()):
                rows = [list(n.parameters())[j] for n in uploads] if uploads else \
                    [loc[j] for loc in self.locals]
                p.copy_(sum(w * r for w, r in zip(self.weights, rows)))

    def _pfedme(self, net, local, batches):
        """K inner steps θ ← θ − η_p(∇f + λ(θ − w) + μθ) per batch, then
        w ← w − λη(w − θ) (PFLlib ``pFedMeOptimizer.step`` / ``clientpFedMe.train``)."""
        import torch

        lam, lr_p, mu = PFEDME["lam"], PFEDME["personal_lr"], PFEDME["code_l2"]
        params = list(net.parameters())
        for x, y in batches:
            for _ in range(PFEDME["inner_steps"]):
                for p in params:
                    p.grad = None
                self.loss(net(x), y).backward()
                with torch.no_grad():
                    for p, w in zip(params, local):
                        p.sub_(lr_p * (p.grad + lam * (p - w) + mu * p))
            with torch.no_grad():
                for p, w in zip(params, local):
                    w.sub_(lam * LR * (w - p))

    def evaluate(self):
        import torch

        models = [self.global_net] if self.name == "fedavg" else None
        with torch.no_grad():
            for i, net in enumerate(self.nets):
                views = models or [net, self.global_net, self._local_net(i)]
                for m in views:
                    for split in (self.fed.test, self.fed.train):
                        x, y = self.rows(split, i)
                        for s in range(0, len(y), 1000):
                            out = m(x[s:s + 1000])
                            self.loss(out, y[s:s + 1000])
                            (out.argmax(1) == y[s:s + 1000]).sum()

    def _local_net(self, i):
        import torch

        net = self._scratch = getattr(self, "_scratch", None) or copy.deepcopy(self.global_net)
        with torch.no_grad():
            for p, w in zip(net.parameters(), self.locals[i]):
                p.copy_(w)
        return net


class PFLlib(Clients):
    """PFLlib's own clients (``--pfllib``), fed our in-memory mini-batches."""

    def __init__(self, name, fed, args, start: dict):
        from side_by_side_pfllib import aggregate, make_peer, peer_modules

        super().__init__(fed, args)
        self.name, self.aggregate = name, aggregate
        self.mods = peer_modules(args.pfllib)
        from flcore.clients.clientpFedMe import clientpFedMe
        from flcore.trainmodel.models import FedAvgCNN

        self.global_net = load_net(FedAvgCNN(1, CLASSES, 1024), start)
        cls = self.mods["fedavg"] if name == "fedavg" else clientpFedMe
        extra = {} if name == "fedavg" else dict(lamda=PFEDME["lam"], K=PFEDME["inner_steps"],
                                                 p_learning_rate=PFEDME["personal_lr"])
        self.peers = {i: make_peer(cls, fed, i, copy.deepcopy(self.global_net), extra,
                                   num_classes=CLASSES, batch_size=args.batch, lr=LR,
                                   double=False) for i in range(N)}

    def train(self):
        for i, peer in self.peers.items():
            peer.feed = self.batches(i)
            peer.set_parameters(self.global_net)
            peer.train()
        self.global_net = self.aggregate(self.mods, self.peers, list(self.peers), self.fed)

    def evaluate(self):
        from torch.utils.data import DataLoader, TensorDataset

        for i, peer in self.peers.items():
            test = TensorDataset(*self.rows(self.fed.test, i))
            peer.load_test_data = lambda b=None, d=test: DataLoader(d, 1000)
            peer.feed = DataLoader(TensorDataset(*self.rows(self.fed.train, i)), 1000)
            if self.name == "pfedme":
                peer.test_metrics_personalized()
                peer.train_metrics_personalized()
            peer.set_parameters(self.global_net)
            peer.test_metrics()
            peer.train_metrics()


# ---- workers --------------------------------------------------------------------------

def worker(side: str, args, conn) -> None:
    import torch

    torch.set_num_threads(1)
    fed = fmnist(args.data)
    algo = side.split("_")[1]
    start = our_cnn().init(1, seed=0, dtype=torch.float32)    # = ours' initial model
    obj = Ours(algo, fed, args) if side.startswith("ours") else \
        Loop(algo, fed, args, start) if side.startswith("loop") else \
        PFLlib(algo, fed, args, start)
    conn.send("ready")
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            return
        if cmd == "peak":
            conn.send(max(peak_gflops() for _ in range(3)))
            continue
        fn = obj.train if cmd == "train" else obj.evaluate
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        c1, w1 = time.process_time(), time.perf_counter()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        conn.send({"cpu": c1 - c0, "wall": w1 - w0, "minflt": r1.ru_minflt - r0.ru_minflt,
                   "maxrss_mib": r1.ru_maxrss / 1024})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pfllib", type=Path, default=None,
                    help="a PFLlib checkout (root): adds its own FedAvg and pFedMe clients")
    ap.add_argument("--data", default=None, help="Fashion-MNIST directory (default: data home)")
    ap.add_argument("--rounds", type=int, default=5, help="timed training rounds per side")
    ap.add_argument("--eval-rounds", type=int, default=2, help="timed evaluations per side")
    ap.add_argument("--local-rounds", type=int, default=5, help="local SGD steps R per round")
    ap.add_argument("--batch", type=int, default=10, help="mini-batch size |D| (PFLlib: 10)")
    ap.add_argument("--sides", nargs="+", default=None, choices=SIDES,
                    help="sides to run (default: all; the PFLlib ones need --pfllib)")
    ap.add_argument("--out", type=Path, default=None,
                    help="results JSON to write; an existing one from other sides (e.g. the "
                         "FedAvg sides, then the pFedMe sides) is merged: its sides are kept, "
                         "each part listed with its own command, date and conditions")
    args = ap.parse_args(argv)
    if args.pfllib is not None and not (args.pfllib / "system" / "flcore").is_dir():
        print(f"bench_fmnist_pfllib: error: {args.pfllib} is not a PFLlib checkout "
              "(no system/flcore)", file=sys.stderr)
        return 2
    sides = args.sides or [s for s in SIDES if args.pfllib or not s.startswith("pfllib")]
    if any(s.startswith("pfllib") for s in sides) and args.pfllib is None:
        print("bench_fmnist_pfllib: error: the pfllib sides need --pfllib DIR", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    workers = {}
    for side in sides:
        here, there = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(side, args, there), daemon=True)
        proc.start()
        workers[side] = (proc, here)
    for side, (_, conn) in workers.items():
        assert conn.recv() == "ready", side

    def ask(side, cmd):
        conn = workers[side][1]
        conn.send(cmd)
        return conn.recv()

    load = [os.getloadavg()[0]]
    peak = max(ask(sides[0], "peak"), ask(sides[-1], "peak"))
    for side in sides:                                               # warm-up, untimed
        ask(side, "train")
        if args.eval_rounds > 1:         # else the one timed evaluation follows this round
            ask(side, "evaluate")
    runs: dict[str, list[dict]] = {f"{s}_{k}": [] for s in sides for k in ("train", "eval")}
    for r in range(args.rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for side in order:
            runs[f"{side}_train"].append(ask(side, "train"))
        if r < args.eval_rounds:
            for side in order:
                runs[f"{side}_eval"].append(ask(side, "evaluate"))
        load.append(os.getloadavg()[0])
    peak = max(peak, ask(sides[0], "peak"))
    for proc, conn in workers.values():
        conn.send("stop")
        proc.join(30)

    def stats(key, field="cpu"):
        v = [x[field] for x in runs[key]]
        return {"min": min(v), "median": statistics.median(v)} if v else None

    cpu = {k: stats(k) for k in runs}
    faults = {k: statistics.median([x["minflt"] for x in v]) for k, v in runs.items() if v}
    train_flops, forward = round_flops(args.local_rounds, args.batch)
    samples = int(fed_counts(args)["total"])
    floor = {"fedavg_train": train_flops / peak / 1e9,
             "pfedme_train": PFEDME["inner_steps"] * train_flops / peak / 1e9,
             "fedavg_eval": samples * forward / peak / 1e9,
             "pfedme_eval": 3 * samples * forward / peak / 1e9}
    ratios = {}
    for algo in ("fedavg", "pfedme"):
        ours = f"ours_{algo}"
        if ours not in sides:
            continue
        for other in ("loop", "pfllib"):
            o = f"{other}_{algo}"
            if o not in sides:
                continue
            for stat in ("min", "median"):
                ratios[f"{o}/{ours} train {stat}"] = cpu[f"{o}_train"][stat] / \
                    cpu[f"{ours}_train"][stat]
                if cpu[f"{o}_eval"] and cpu[f"{ours}_eval"]:
                    ratios[f"{o}/{ours} with evaluation {stat}"] = (
                        cpu[f"{o}_train"][stat] + cpu[f"{o}_eval"][stat]) / (
                        cpu[f"{ours}_train"][stat] + cpu[f"{ours}_eval"][stat])
        ratios[f"{ours}/floor train min"] = cpu[f"{ours}_train"]["min"] / floor[f"{algo}_train"]
    conditions = (f"CPU {platform.machine()} ({_cpu_name()}), {os.cpu_count()} cores, one torch "
                  f"thread per worker, torch {_torch_version()}, 1-min load average "
                  f"{min(load):.1f}–{max(load):.1f}")
    print(f"W2: Fashion-MNIST N={N}, FedAvgCNN, R={args.local_rounds}, |D|={args.batch}, every "
          f"client every round; {conditions}; process CPU seconds per round, "
          f"{args.rounds} training / {args.eval_rounds} evaluation rounds per side, interleaved")
    print(f"matrix-product peak {peak:.1f} GFLOP/s; FLOP floor: FedAvg training "
          f"{floor['fedavg_train']:.3f} s ({train_flops / 1e9:.1f} GFLOP), pFedMe training "
          f"{floor['pfedme_train']:.3f} s, evaluation {floor['fedavg_eval']:.2f} s per model")
    for k, v in cpu.items():
        if v:
            print(f"{k:>22}: min {v['min']:7.3f}  median {v['median']:7.3f}  "
                  f"(minor faults/round {faults[k]:,.0f})")
    for k, v in ratios.items():
        print(f"{k:>45}: {v:5.2f}x")
    if args.out:
        given = argv if argv is not None else sys.argv[1:]
        part = {"command": "python benchmarks/bench_fmnist_pfllib.py " + " ".join(
                    "PATH" if a == str(args.pfllib) else a for a in given),
                "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "conditions": conditions, "load_average": load, "sides": sides,
                "rounds_timed": args.rounds, "eval_rounds": args.eval_rounds,
                "peak_gflops": peak}
        write_results(args.out, part, {
            "workload": "W2: FedAvg/pFedMe, Fashion-MNIST, FedAvgCNN, N=40, CPU",
            "method": "process CPU time per round in long-lived one-thread workers, sides "
                      "interleaved, min and median",
            "local_rounds": args.local_rounds, "batch": args.batch,
            "pfllib_commit": _pfllib_commit(args.pfllib),
            "train_gflop_fedavg": train_flops / 1e9, "floor_seconds": floor,
            "cpu_seconds": {k: v for k, v in cpu.items() if v},
            "minor_faults_median": faults, "runs": {k: v for k, v in runs.items() if v},
            "ratios": ratios})
        print(f"wrote {args.out}")
    return 0


def write_results(path: Path, part: dict, results: dict) -> None:
    """``results`` into ``path``, merged with the parts of an earlier run of other sides
    (same workload and settings) already there."""
    old = json.loads(path.read_text()) if path.is_file() else None
    same = old is not None and all(old.get(k) == results[k] for k in (
        "workload", "local_rounds", "batch")) and not set(old.get("cpu_seconds", {})) & set(
        results["cpu_seconds"])
    if same:
        for key in ("cpu_seconds", "minor_faults_median", "runs", "ratios"):
            results[key] = {**old[key], **results[key]}
        # each algorithm's floor at the peak of the part that timed it (its ratio's)
        mine = {s.split("_")[1] for s in part["sides"]}
        results["floor_seconds"] = {k: v if k.split("_")[0] in mine else old["floor_seconds"][k]
                                    for k, v in results["floor_seconds"].items()}
        results["pfllib_commit"] = results["pfllib_commit"] or old.get("pfllib_commit")
    results["parts"] = (old["parts"] if same else []) + [part]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


def fed_counts(args) -> dict:
    fed = fmnist(args.data)
    return {"total": int(fed.train.counts.sum()) + int(fed.test.counts.sum())}


def _torch_version() -> str:
    import torch

    return torch.__version__


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _pfllib_commit(root: Path | None) -> str | None:
    if root is None:
        return None
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
