"""Bring your own model: a plain single-client ``torch.nn.Module`` trained by pFedMe.

    python examples/custom_model.py --rounds 20 --clients 20

``FunctionalModel`` batches the module over all clients with ``torch.func``
(``functional_call`` + ``vmap`` + ``grad``), so every registered algorithm can train it; the
module only has to map one client's batch ``x[B, features]`` to logits ``[B, classes]``.
"""

from __future__ import annotations

import argparse

import torch.nn as nn

from algorithms.engine.base import get_algorithm
from algorithms.engine.functional import FunctionalModel
from algorithms.engine.runner import run
from synthetic.sources import DataSpec, build_federation


def main(argv: list[str] | None = None) -> dict:
    """Train pFedMe with a two-layer tanh network on FedProx Synthetic; returns the last
    evaluation (accuracies of the personalized, global and local models)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--algorithm", default="pfedme")
    args = ap.parse_args(argv)

    fed = build_federation(DataSpec(data="synthetic", num_clients=args.clients))
    net = nn.Sequential(nn.Linear(60, 32), nn.Tanh(), nn.Linear(32, 10))  # any nn.Module
    algorithm = get_algorithm(args.algorithm)(clients_per_round=min(10, args.clients))
    result = run(algorithm, fed, FunctionalModel(net), rounds=args.rounds, progress=False)
    last = result.history.last()
    for key, value in last.items():
        if key.endswith("_accuracy") and isinstance(value, float):
            print(f"{key:<24}{value:.4f}")
    return last


if __name__ == "__main__":
    main()
