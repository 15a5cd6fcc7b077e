"""Side by side with PFLlib: FedProx, SCAFFOLD, FedBN, FedRoD and FedALA of this toolkit
against PFLlib's public client classes (``system/flcore/clients/client{prox,scaffold,bn,rod,
ala}.py``, ``system/utils/ALA.py``) and server aggregation (``serverbase.py``,
``serverscaffold.py``), on the same mini-batches, in float64.

PFLlib is not vendored and not a dependency: pass the path of a local checkout
(``--pfllib DIR``, the repository root holding ``system/``).  Its client classes are
subclassed only to hand them our mini-batches (``load_train_data`` returns the round's
``R`` batches of the client, in order, as one local epoch; FedALA's ``train_data`` is the
round's ALA batches with ``rand_percent = 100``), so their own ``train`` /
``set_parameters`` / ``local_initialization`` and optimisers run unchanged; the server
steps are PFLlib's ``aggregate_parameters`` methods bound to a stand-in holding the
uploads.  The network is the same on both sides: ``dim → hidden (→ BatchNorm for FedBN) →
ReLU → classes`` (a ``base`` and a ``head`` module, as PFLlib's FedRoD needs; BN entries
named ``bn`` as PFLlib's FedBN needs), initialised from our model's parameters.

Setting: 4 clients of 20–35 samples, 3 classes, 5 features (planted Gaussian classes with
label skew), every client taking part (PFLlib's FedALA initialises every client each round,
``serverala.py`` ``send_models``: with partial participation the unsampled clients' ALA
would differ from the paper's Algorithm 1, which only the sampled clients run), R = 3 local
steps of |D| = 5, η = 0.1.  Reported per algorithm: the largest parameter difference after
one client update (client 0, round 0) and after each of ``--rounds`` rounds (global and
client-held parameters), with the alignments needed where the two differ by design:

* FedRoD: PFLlib copies the generic head into the personalized head at start; ours starts
  at zero (algorithms/methods/decoupled/fedrod.py) — the peer's head is zeroed before round 0;
* FedBN: PFLlib weighs clients by sample counts (serverbase ``aggregate_parameters``), the
  FedBN authors' code uniformly — ours runs with ``aggregation="weighted"`` here; PFLlib
  keeps BN *parameters* local by name and never sends buffers (running statistics stay on
  the clients), as ours;
* FedALA: PFLlib's first ALA of a client loops until the loss settles (ALA.py, ``while
  True`` … ``np.std(losses[-num_pre_loss:]) < threshold``); ours takes ``ala_start_steps``
  — the peer's ``start_phase`` is switched off and ours runs ``ala_start_steps =
  ala_steps`` (one pass over the same batches).

Usage: ``python benchmarks/side_by_side_pfllib.py --pfllib ~/src/PFLlib [--rounds 2]
[--algorithms fedprox scaffold fedbn fedrod fedala]``.  Last line: ``max difference: <x>``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import datetime
import sys
import types
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from algorithms.engine.base import get_algorithm
from algorithms.engine.contract import engine_view
from algorithms.engine.models import DNN, BatchNormMLP
from synthetic.federation import Federation

DIM, HIDDEN, CLASSES, LR, STEPS, BATCH = 5, 8, 3, 0.1, 3, 5


def federation() -> Federation:
    rng = np.random.RandomState(0)
    centres = rng.randn(CLASSES, DIM) * 2
    xs, ys = [], []
    for i, n in enumerate((28, 35, 20, 31)):
        p = np.roll([0.6, 0.3, 0.1], i)
        y = rng.choice(CLASSES, n, p=p)
        xs.append(centres[y] + rng.randn(n, DIM))
        ys.append(y)
    return Federation.from_client_arrays(xs, ys, num_classes=CLASSES, seed=0, device="cpu",
                                         dtype=torch.float64)


class PeerNet(nn.Module):
    """``base`` (fc1 [→ bn1] → ReLU) and ``head`` (linear), as PFLlib's FedRoD expects."""

    def __init__(self, bn: bool):
        super().__init__()
        layers = [("fc1", nn.Linear(DIM, HIDDEN))]
        if bn:
            layers.append(("bn1", nn.BatchNorm1d(HIDDEN)))
        self.base = nn.Sequential(OrderedDict(layers + [("relu", nn.ReLU())]))
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(self.base(x.flatten(1)))


OURS_TO_PEER = {"fc1.weight": "base.fc1.weight", "fc1.bias": "base.fc1.bias",
                "bn1.weight": "base.bn1.weight", "bn1.bias": "base.bn1.bias",
                "bn1.running_mean": "base.bn1.running_mean",
                "bn1.running_var": "base.bn1.running_var",
                "fc2.weight": "head.weight", "fc2.bias": "head.bias"}


def to_peer(net: nn.Module, params: dict, row: int = 0) -> None:
    """Copy our row ``row`` into ``net`` (dense weights transposed: ours are [in, out])."""
    state = net.state_dict()
    for k, v in params.items():
        t = v[row]
        state[OURS_TO_PEER[k]] = t.T.clone() if k.endswith("weight") and t.dim() == 2 else t.clone()
    net.load_state_dict(state)


def from_peer(net: nn.Module, keys) -> dict:
    """``net``'s entries under our names and layouts."""
    state = net.state_dict()
    return {k: _ours(state[OURS_TO_PEER[k]]) for k in keys}


def _ours(t: torch.Tensor) -> torch.Tensor:
    """A peer tensor in our layout (``nn.Linear`` weights [out, in] → [in, out])."""
    t = t.detach()
    return t.T if t.dim() == 2 else t


def diff(ours: dict, row: int, theirs: dict) -> float:
    return max(float((ours[k][row] - theirs[k]).abs().max()) for k in theirs)


def peer_modules(root: Path):
    """PFLlib's client and server classes from the checkout ``root`` (its ``system/`` on
    ``sys.path``).  ``serverbase`` imports ``h5py`` only to save results files: where it is
    not installed an empty stand-in module is registered (no code we run uses it)."""
    sys.path.insert(0, str(root / "system"))
    if importlib.util.find_spec("h5py") is None:
        sys.modules.setdefault("h5py", types.ModuleType("h5py"))
    from flcore.clients.clientavg import clientAVG
    from flcore.clients.clientala import clientALA
    from flcore.clients.clientbn import clientBN
    from flcore.clients.clientprox import clientProx
    from flcore.clients.clientrod import clientROD
    from flcore.clients.clientscaffold import clientSCAFFOLD
    from flcore.servers.serverbase import Server
    from flcore.servers.serverscaffold import SCAFFOLD
    import flcore.clients.clientala as ala_module
    return dict(fedprox=clientProx, scaffold=clientSCAFFOLD, fedbn=clientBN, fedrod=clientROD,
                fedala=clientALA, fedavg=clientAVG, Server=Server, SCAFFOLDServer=SCAFFOLD,
                ala_module=ala_module)


def fed_loader(fed, i: int, batches: torch.Tensor) -> list:
    """Client ``i``'s mini-batches ``batches[R, N, B]`` as a list of ``(x, y)``."""
    return [fed.train.gather(batches[r, i]) for r in range(batches.shape[0])]


def make_peer(cls, fed, i: int, net: nn.Module, extra: dict, ala_data=None, *,
              num_classes: int = CLASSES, batch_size: int = BATCH, lr: float = LR,
              double: bool = True):
    """A PFLlib client of class ``cls`` for client ``i`` whose data loader we feed (``feed``:
    the list its ``load_train_data`` returns)."""
    class Fed(cls):
        def load_train_data(self, batch_size=None):
            return self.feed

    o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
    Fed.feed = [(fed.train.x[o:o + n], fed.train.y[o:o + n])]     # whole data at set-up
    args = types.SimpleNamespace(model=net, algorithm="x", dataset="x", device="cpu",
                                 save_folder_name="x", num_classes=num_classes,
                                 batch_size=batch_size, local_learning_rate=lr,
                                 local_epochs=1, few_shot=0,
                                 learning_rate_decay_gamma=1.0, learning_rate_decay=False,
                                 **extra)
    peer = Fed(args, i, n, int(fed.test.counts[i]), train_slow=False, send_slow=False)
    if double:
        peer.model.double()
    return peer


def aggregate(mods, peers: dict, chosen, fed, *, scaffold=None) -> nn.Module:
    """PFLlib's server step (serverbase / serverscaffold ``aggregate_parameters``)."""
    total = sum(int(fed.train.counts[i]) for i in chosen)
    if scaffold is not None:
        stub = types.SimpleNamespace(global_model=scaffold[0], global_c=scaffold[1],
                                     uploaded_ids=list(chosen), clients=peers,
                                     num_join_clients=len(chosen), server_learning_rate=1.0,
                                     num_clients=fed.num_clients)
        mods["SCAFFOLDServer"].aggregate_parameters(stub)
        return stub
    weights = [int(fed.train.counts[i]) / total for i in chosen]
    stub = types.SimpleNamespace(uploaded_models=[peers[i].model for i in chosen],
                                 uploaded_weights=weights)
    stub.add_parameters = types.MethodType(mods["Server"].add_parameters, stub)
    mods["Server"].aggregate_parameters(stub)
    return stub.global_model


def compare(name: str, mods, rounds: int) -> list[float]:
    fed = federation()
    bn = name == "fedbn"
    model = BatchNormMLP(DIM, CLASSES, hidden=(HIDDEN,)) if bn else DNN(DIM, CLASSES, hidden=HIDDEN)
    common = dict(lr=LR, local_rounds=STEPS, batch_size=BATCH, clients_per_round=fed.num_clients)
    extra_ours = {"fedprox": dict(mu=0.5), "fedbn": dict(aggregation="weighted"),
                  "fedrod": dict(personal_lr=LR),
                  "fedala": dict(ala_steps=2, ala_start_steps=2, ala_lr=1.0)}.get(name, {})
    alg = get_algorithm(name)(**common, **extra_ours)
    state = alg.init(fed, model, seed=0)
    keys = list(model.init(1))
    start = {"fedbn": lambda s: {**s.models["global"], **s.models["local_norm"]},
             "fedrod": lambda s: {**s.models["body"], **s.models["generic_head"]},
             "fedala": lambda s: s.models["global"]}.get(name, lambda s: s.models["global"])(state)
    net = PeerNet(bn).double()
    to_peer(net, start)
    extra_peer = {"fedprox": dict(mu=0.5), "fedala": dict(eta=1.0, rand_percent=100,
                                                            layer_idx=2)}.get(name, {})
    if name == "fedala":      # the peer's ALA reads the client's data at set-up; fed per round
        mods["ala_module"].read_client_data = lambda *a, **k: []
    peers = {i: make_peer(mods[name], fed, i, copy.deepcopy(net), extra_peer)
             for i in range(fed.num_clients)}
    for p in peers.values():
        if name == "fedrod":
            p.head.double()
            for t in p.head.parameters():
                t.data.zero_()
        if name == "fedala":
            p.ALA.start_phase = False
    global_net, global_c = copy.deepcopy(net), [torch.zeros_like(t) for t in net.parameters()]
    out = []
    for t in range(rounds):
        phase = alg.first_phase(state, fed, model)
        chosen = phase.clients.tolist()
        for i in chosen:
            peers[i].feed = fed_loader(fed, i, phase.batches["sgd"])
            if name == "scaffold":
                peers[i].set_parameters(global_net, global_c)
            elif name == "fedala":
                xs, ys = zip(*fed_loader(fed, i, phase.batches["ala"]))
                peers[i].ALA.train_data = list(zip(torch.cat(xs), torch.cat(ys)))
                peers[i].local_initialization(global_net)
            else:
                peers[i].set_parameters(global_net)
            peers[i].train()
        if t == 0:
            view = engine_view(alg, state, fed, phase)
            _, upload = alg.client_update(phase, model, view)
            if name == "fedrod":
                mine = {**upload["body"], **upload["generic_head"]}
            else:
                mine = upload["model" if name == "scaffold" else "global"]
            first = diff(mine, 0, from_peer(peers[chosen[0]].model, list(mine)))
            print(f"{name}: one client update (client {chosen[0]}, round 0): max |ours − PFLlib| "
                  f"{first:.3g}")
            out.append(first)
        state = alg.round(state, fed, model)
        if name == "scaffold":
            stub = aggregate(mods, peers, chosen, fed, scaffold=(global_net, global_c))
            global_net, global_c = stub.global_model, stub.global_c
        else:
            global_net = aggregate(mods, peers, chosen, fed)
        d = round_difference(name, state, global_net, peers, keys, global_c)
        print(f"{name}: after round {t + 1}: max |ours − PFLlib| {d:.3g}")
        out.append(d)
    return out


def round_difference(name, state, global_net, peers, keys, global_c) -> float:
    m = state.models
    if name == "fedbn":
        shared = list(m["global"])
        d = diff(m["global"], 0, from_peer(global_net, shared))
        return max(d, *(diff(m["local_norm"], i, from_peer(p.model, list(m["local_norm"])))
                        for i, p in peers.items()))
    if name == "fedrod":
        d = diff({**m["body"], **m["generic_head"]}, 0, from_peer(global_net, keys))
        heads = m["personal_head"]
        return max(d, *(max(float((heads["fc2.weight"][i] - _ours(p.head.weight)).abs().max()),
                            float((heads["fc2.bias"][i] - _ours(p.head.bias)).abs().max()))
                        for i, p in peers.items()))
    d = diff(m["global"], 0, from_peer(global_net, keys))
    if name == "scaffold":
        d = max(d, *(float((m["control"][k][0] - _ours(b)).abs().max())
                     for k, b in zip(keys, global_c)))
        for i, p in peers.items():
            d = max(d, *(float((m["client_control"][k][i] - _ours(b)).abs().max())
                         for k, b in zip(keys, p.client_c)))
    if name == "fedala":
        d = max(d, *(diff(m["local"], i, from_peer(p.model, keys)) for i, p in peers.items()))
        d = max([d] + [float((m["ala_weights"][k][i] - _ours(w)).abs().max())
                       for i, p in peers.items() for k, w in zip(["fc2.weight", "fc2.bias"],
                                                                   p.ALA.weights or [])])
    return d


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pfllib", type=Path, required=True, help="local PFLlib checkout (root)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--algorithms", nargs="+", default=["fedprox", "scaffold", "fedbn", "fedrod",
                                                       "fedala"])
    args = p.parse_args(argv)
    if not (args.pfllib / "system" / "flcore").is_dir():
        print(f"side_by_side_pfllib: error: {args.pfllib} is not a PFLlib checkout "
              "(no system/flcore)", file=sys.stderr)
        return 2
    mods = peer_modules(args.pfllib)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, float64, "
          f"N = 4 clients (all taking part), R = {STEPS}, |D| = {BATCH}, η = {LR}")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)     # the peer's own tensors (zeros_like etc.)
    try:
        worst = 0.0
        for name in args.algorithms:
            worst = max(worst, *compare(name, mods, args.rounds))
    finally:
        torch.set_default_dtype(before)
    print(f"max difference: {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
