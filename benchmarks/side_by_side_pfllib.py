"""Side by side with PFLlib (J. Zhang et al., *PFLlib: A Beginner-Friendly and Comprehensive
Personalized Federated Learning Library*, JMLR 2025; github.com/TsingZ0/PFLlib): the peer's
own client and server code run on **our** mini-batches, from **our** initial model, and the
parameters compared after one client update and after each round.

The peer is never vendored: ``--pfllib PATH`` names a local checkout (its ``system/``
folder is put on ``sys.path``; its clients import scikit-learn).  Nothing here runs in CI.

What is compared, per algorithm (MLR on a small Synthetic(0.5, 0.5) federation, float64,
every client taking part, the peer's model an ``nn.Linear`` holding our ``Wᵀ, b``):

* the peer client's ``train()`` with its loader replaced by our R mini-batches of that
  client and round (one local "epoch" = our R steps), against our ``client_update`` upload;
* the peer server's aggregation of those uploads (its own ``aggregate_parameters``, on an
  instance built without its data-reading constructor), against our ``server_aggregate``.

Known departures are printed with the peer's line and our equation, never hidden: e.g.
SCAFFOLD — PFLlib averages Δy uniformly over the joined clients and c over all N (as the
paper; ours with ``aggregation='uniform'``).

The peer needs its own requirements beside ours (``h5py``, ``scikit-learn``).

Usage: ``python benchmarks/side_by_side_pfllib.py --pfllib ~/src/PFLlib [--algorithm fedprox
scaffold] [--rounds 2] [--json OUT]``.  Last line per algorithm:
``<name>: max |ours − PFLlib| client <c>, round <r>`` (0 or ~1e-15 = equal).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from algorithms.base import get_algorithm  # noqa: E402
from algorithms.contract import engine_round, engine_view  # noqa: E402
from algorithms.models import MLR  # noqa: E402
from synthetic import fedprox as fedprox_data  # noqa: E402


def peer_args(model, **extra) -> types.SimpleNamespace:
    """The fields PFLlib's ``Client.__init__`` reads, with learning-rate decay off."""
    base = dict(model=model, algorithm="side-by-side", dataset="none", device="cpu",
                save_folder_name="none", num_classes=10, batch_size=0, local_learning_rate=0.0,
                local_epochs=1, few_shot=0, learning_rate_decay=False,
                learning_rate_decay_gamma=1.0)
    base.update(extra)
    return types.SimpleNamespace(**base)


def to_linear(params: dict, i: int) -> torch.nn.Module:
    """Our MLR row ``i`` (``x W + b``, ``W [d, C]``) as the peer's ``nn.Linear`` (``W x + b``)."""
    w, b = params["fc.weight"][i], params["fc.bias"][i]
    lin = torch.nn.Linear(w.shape[0], w.shape[1]).double()
    with torch.no_grad():
        lin.weight.copy_(w.t())
        lin.bias.copy_(b)
    return lin


def from_linear(lin: torch.nn.Module) -> dict:
    return {"fc.weight": lin.weight.detach().t().clone(), "fc.bias": lin.bias.detach().clone()}


def max_diff(ours: dict, i: int, peer: dict) -> float:
    return max(float((ours[k][i] - peer[k]).abs().max()) for k in peer)


def client_batches(view, i: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = view.batches["sgd"]
    return [(x[r, i].clone(), y[r, i].clone()) for r in range(x.shape[0])]


def make_client(cls, args, cid: int, n_train: int, batches):
    client = cls(args, id=cid, train_samples=n_train, test_samples=0, train_slow=False,
                 send_slow=False)
    client.load_train_data = lambda batch_size=None: list(batches)   # our batches, in order
    return client


def bare_server(cls, **attrs):
    """A peer server object without its constructor (which reads the peer's datasets)."""
    server = object.__new__(cls)
    for k, v in attrs.items():
        setattr(server, k, v)
    return server


# ---- per algorithm: our hyper-parameters and the peer's round ----------------------------

def fedprox_round(peer, hyper, state, view, fed, rounds_state):
    from flcore.clients.clientprox import clientProx
    from flcore.servers.serverbase import Server
    n = fed.num_clients
    models, uploads = [], []
    for i in range(n):
        args = peer_args(to_linear(state.models["global"], 0), mu=hyper["mu"],
                         local_learning_rate=hyper["lr"], batch_size=hyper["batch_size"])
        c = make_client(clientProx, args, i, int(fed.train.counts[i]), client_batches(view, i))
        c.set_parameters(to_linear(state.models["global"], 0))
        c.train()
        models.append(c.model)
        uploads.append(from_linear(c.model))
    total = float(fed.train.counts.sum())
    server = bare_server(Server, uploaded_models=models,
                         uploaded_weights=[float(fed.train.counts[i]) / total for i in range(n)])
    server.aggregate_parameters()
    return uploads, {"global": from_linear(server.global_model)}


def scaffold_round(peer, hyper, state, view, fed, rounds_state):
    from flcore.clients.clientscaffold import clientSCAFFOLD
    from flcore.servers.serverscaffold import SCAFFOLD
    n = fed.num_clients
    glob = to_linear(state.models["global"], 0)
    if "clients" not in rounds_state:            # the peer's control variates live across rounds
        rounds_state["global_c"] = [torch.zeros_like(p) for p in glob.parameters()]
        rounds_state["client_c"] = [[torch.zeros_like(p) for p in glob.parameters()]
                                    for _ in range(n)]
        rounds_state["clients"] = True
    clients, uploads = [], []
    for i in range(n):
        args = peer_args(copy.deepcopy(glob), local_learning_rate=hyper["lr"],
                         batch_size=hyper["batch_size"])
        c = make_client(clientSCAFFOLD, args, i, int(fed.train.counts[i]), client_batches(view, i))
        c.client_c = rounds_state["client_c"][i]
        c.set_parameters(copy.deepcopy(glob), rounds_state["global_c"])
        c.train()
        rounds_state["client_c"][i] = c.client_c
        clients.append(c)
        uploads.append(from_linear(c.model))
    server = bare_server(SCAFFOLD, global_model=copy.deepcopy(glob),
                         global_c=rounds_state["global_c"], clients=clients,
                         uploaded_ids=list(range(n)), num_join_clients=n, num_clients=n,
                         server_learning_rate=hyper.get("global_lr", 1.0))
    server.aggregate_parameters()
    rounds_state["global_c"] = server.global_c
    return uploads, {"global": from_linear(server.global_model)}


ALGORITHMS = {
    # name: (our hyper-parameters, our upload's name, the peer's round, departures to print)
    "fedprox": ({"mu": 0.5, "lr": 0.05, "local_rounds": 5, "batch_size": 8}, "global",
                fedprox_round, "none expected: clientprox.py PerturbedGradientDescent.step is "
                "w ← w − η(∇f + μ(w − wᵗ)), FedProx eq. 2; server: sample-weighted mean"),
    "scaffold": ({"lr": 0.05, "local_rounds": 5, "batch_size": 8, "aggregation": "uniform",
                  "global_lr": 1.0}, "model",
                 scaffold_round, "none expected: clientscaffold.py update_yc is option II "
                 "c_i⁺ = c_i − c + (x − y_i)/(Kη); serverscaffold.py aggregate_parameters: "
                 "x += Δy/|S|·η_g, c += Δc/N (Algorithm 1, lines 16–17)"),
}


def compare(name: str, pfllib: Path, rounds: int, clients: int, seed: int) -> dict:
    hyper, upload_key, peer_round, departures = ALGORITHMS[name]
    fed = fedprox_data.federation(0.5, 0.5, num_clients=clients, seed=seed,
                                  max_client_size=60, dtype=torch.float64)
    model = MLR(fed.feature_shape[0], fed.num_classes)
    alg = get_algorithm(name)(clients_per_round=clients, **hyper)
    state = alg.init(fed, model, seed)
    rounds_state: dict = {}
    out = {"algorithm": name, "departures": departures, "rounds": []}
    for t in range(rounds):
        phase = alg.first_phase(state, fed, model)
        view = engine_view(alg, state, fed, phase)
        _, upload = alg.client_update(phase, model, view)
        peer_uploads, peer_server = peer_round(pfllib, hyper, state, view, fed, rounds_state)
        client_diff = max(max_diff(upload[upload_key], i, peer_uploads[i]) for i in range(clients))
        state = engine_round(alg, state, fed, model)
        server_diff = max_diff(state.models["global"], 0, peer_server["global"])
        out["rounds"].append({"round": t + 1, "client_update_max_abs_diff": client_diff,
                              "round_max_abs_diff": server_diff})
        print(f"{name} round {t + 1}: client update max |ours − PFLlib| = {client_diff:.2e}, "
              f"server model after the round = {server_diff:.2e}")
    print(f"{name}: departures: {departures}")
    worst = max(max(r["client_update_max_abs_diff"], r["round_max_abs_diff"]) for r in out["rounds"])
    print(f"{name}: max |ours − PFLlib| {worst:.2e} over {rounds} round(s)")
    out["max_abs_diff"] = worst
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pfllib", type=Path, required=True, help="a local PFLlib checkout")
    ap.add_argument("--algorithm", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the differences here")
    args = ap.parse_args(argv)
    system = args.pfllib.expanduser().resolve() / "system"
    if not (system / "flcore").is_dir():
        ap.error(f"--pfllib {args.pfllib}: no system/flcore folder (not a PFLlib checkout)")
    sys.path.insert(0, str(system))
    torch.set_default_dtype(torch.float64)
    results = [compare(a, args.pfllib, args.rounds, args.clients, args.seed) for a in args.algorithm]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
