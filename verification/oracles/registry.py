"""Oracles: every registered algorithm written a second time, client by client, from its paper.

An :class:`Oracle` is an algorithm's rounds written as plain per-client loops in float64
(autograd on one client's ``[1, ...]`` copy, Python sums over the clients), sharing no code
with the method's ``client_update`` / ``server_aggregate``.  What the two share, by design:

* the initial state (``alg.init``: the model draw, and any data-free server state);
* the round's random draws — mini-batch indices and sampled clients, drawn from the same
  round generator in the same order (``Federation.sample_batches``, ``sample_clients``),
  so the two see the same mini-batches;
* the model's ``forward`` (the network is not the algorithm) and, where the paper leaves a
  choice open, the documented reading (each oracle's docstring says which).

:func:`register_oracle` registers an oracle and its identity check
``<algorithm>.engine_equals_oracle`` in :mod:`verification.core.registry`: the engine and the
oracle run ``rounds`` rounds (2 at the quick size) on the same small float64 federation and
every observed quantity must agree after every round to ``tolerance`` (relative to
max(1, its size)).  A plugin registers its own oracle the same way (docs/extending.md), so
its check appears in ``pflt verify``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from verification.core.registry import Context, Outcome, check

Quantities = dict[str, torch.Tensor]

#: the default tolerance and its reason (float64, a few hundred operations per round)
TOLERANCE = 1e-10
TOLERANCE_REASON = ("float64; batched kernels against one-client kernels and sums in "
                    "another order over 2-3 rounds of a few hundred operations (~1e-15 "
                    "relative); any changed step (a rate ×1.01, a sign, a sum for a mean) "
                    "moves the state by > 1e-4")

#: the ending of every oracle check's id: ``<algorithm>.engine_equals_oracle``
CHECK_SUFFIX = ".engine_equals_oracle"

_ORACLES: dict[str, "Oracle"] = {}


@dataclass(frozen=True)
class Oracle:
    """An algorithm's independent per-client form.

    ``make()``: the algorithm with small hyper-parameters; ``setting(seed)``: ``(federation,
    model)`` in float64; ``trajectory(alg, fed, model, seed, rounds)``: the oracle's observed
    quantities after each round (a list of ``rounds`` dicts); ``observe(alg, state, fed,
    model)``: the same quantities read from the engine's state."""

    algorithm: str
    paper: str
    reference: str
    make: Callable[[], Any]
    setting: Callable[[int], tuple[Any, Any]]
    trajectory: Callable[..., list[Quantities]]
    observe: Callable[..., Quantities]
    tolerance: float = TOLERANCE
    tolerance_reason: str = TOLERANCE_REASON
    rounds: int = 2

    @property
    def check_id(self) -> str:
        return f"{self.algorithm}{CHECK_SUFFIX}"


def register_oracle(oracle: Oracle) -> Oracle:
    """Add ``oracle`` and register its identity check (see the module docstring)."""
    if oracle.rounds < 2:
        raise ValueError(f"oracle of {oracle.algorithm!r}: at least 2 rounds, got {oracle.rounds}")
    _ORACLES[oracle.algorithm] = oracle

    @check(oracle.check_id, paper=oracle.paper, reference=oracle.reference, kind="identity",
           tolerance=oracle.tolerance, tolerance_reason=oracle.tolerance_reason,
           quick={"rounds": oracle.rounds}, full={"rounds": oracle.rounds + 1})
    def engine_equals_oracle(ctx: Context) -> Outcome:
        dev, rounds = compare(oracle, seed=ctx.seed, rounds=ctx.params["rounds"])
        return Outcome(measured=dev, theoretical=0.0, holds=dev <= ctx.tolerance,
                       detail=f"max relative difference engine vs per-client oracle over "
                              f"{rounds} rounds: {dev:.2e}")

    engine_equals_oracle.__doc__ = (f"{oracle.algorithm}: the batched engine equals its "
                                    f"per-client float64 oracle ({oracle.reference}).")
    return oracle


def oracles() -> dict[str, Oracle]:
    """The registered oracles by algorithm name (import :mod:`verification.checks` first:
    :func:`verification.core.registry.load_all`)."""
    return dict(sorted(_ORACLES.items()))


def engine_trajectory(oracle: Oracle, alg, fed, model, seed: int, rounds: int
                      ) -> list[Quantities]:
    """The engine's observed quantities after each of ``rounds`` rounds."""
    state = alg.init(fed, model, seed)
    out = []
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        out.append(oracle.observe(alg, state, fed, model))
    return out


def deviation(engine: list[Quantities], reference: list[Quantities]) -> float:
    """max over rounds and quantities of ``max|e − o| / max(1, max|o|)``; a missing quantity
    or a shape mismatch is ``inf``."""
    if len(engine) != len(reference):
        return float("inf")
    worst = 0.0
    for e, o in zip(engine, reference):
        if set(e) != set(o):
            return float("inf")
        for k in o:
            a = torch.as_tensor(e[k], dtype=torch.float64)
            b = torch.as_tensor(o[k], dtype=torch.float64)
            if a.shape != b.shape:
                a, b = a.reshape(-1), b.reshape(-1)
                if a.shape != b.shape:
                    return float("inf")
            if b.numel() == 0:
                continue
            scale = max(1.0, float(b.abs().max()))
            d = float((a - b).abs().max()) / scale
            if d != d:
                return float("inf")
            worst = max(worst, d)
    return worst


def compare(oracle: Oracle, *, seed: int = 0, rounds: int | None = None) -> tuple[float, int]:
    """``(deviation, rounds)`` of the engine against the oracle on ``oracle.setting(seed)``."""
    rounds = oracle.rounds if rounds is None else rounds
    fed, model = oracle.setting(seed)
    alg = oracle.make()
    eng = engine_trajectory(oracle, alg, fed, model, seed, rounds)
    ref = oracle.trajectory(alg, fed, model, seed, rounds)
    return deviation(eng, ref), rounds


def stepwise(oracle_round: Callable[..., Any], observe: Callable[..., Quantities]
             ) -> Callable[..., list[Quantities]]:
    """A trajectory from a one-round oracle ``oracle_round(alg, state, fed, model) -> State``
    started at ``alg.init`` (the shared initial state)."""
    def trajectory(alg, fed, model, seed, rounds):
        state = alg.init(fed, model, seed)
        out = []
        for _ in range(rounds):
            state = oracle_round(alg, state, fed, model)
            out.append(observe(alg, state, fed, model))
        return out
    return trajectory


def models_of(*names: str) -> Callable[..., Quantities]:
    """``observe`` reading the parameter dicts ``names`` of the state (``name/key``)."""
    def observe(alg, state, fed, model):
        return {f"{n}/{k}": v for n in names for k, v in state.models[n].items()}
    return observe


def per_round(final: Callable[..., Any], quantities: Callable[[Any], Quantities]
              ) -> Callable[..., list[Quantities]]:
    """A trajectory from an oracle that returns its result after ``rounds`` rounds,
    ``final(alg, fed, model, seed, rounds)``: re-run for 1, 2, … rounds (the settings are
    tiny), each result turned into quantities by ``quantities``."""
    def trajectory(alg, fed, model, seed, rounds):
        return [quantities(final(alg, fed, model, seed, r)) for r in range(1, rounds + 1)]
    return trajectory


def algorithm(name: str, **hyperparameters) -> Callable[[], Any]:
    """``make`` for an :class:`Oracle`: the registered algorithm ``name`` with these
    hyper-parameters (looked up when the check runs)."""
    def make():
        from algorithms.engine.base import get_algorithm
        return get_algorithm(name)(**hyperparameters)
    return make
