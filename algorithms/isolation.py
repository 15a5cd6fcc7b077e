"""Train/test isolation: no algorithm may read a client's test split while it trains.

The property (issue 34): run an algorithm twice on federations identical except for the test
split — its labels permuted, its features replaced by noise (:func:`with_test_replaced`) —
and require

* **bit-identical states** after ``init`` and after every round (every model, every tensor);
* **bit-identical training-side histories**: every entry the runner records that is not
  computed from the test split (:func:`is_test_side`) — the train losses, the algorithm's
  diagnostics, the round.

Any read of the test split that reaches the state — an adaptation step on test mini-batches,
a "validation" split that is in fact the test split, test statistics in a server step —
moves some state entry, so the two runs differ.  Validation splits an algorithm documents
(model selection, held-out tuning) must therefore be carved from the *training* split.

What the replacement cannot show: a read of the test split's sizes (kept) or of its total
label counts alone (a permutation of all test labels keeps them; each client's counts
change); every feature and every client's labels change.

:func:`isolation_differences` runs with every client taking part in every round
(``clients_per_round = N`` where the algorithm has that field, :func:`every_client`): the
engine hands ``client_update`` the participants' test split only when all clients take part
(``ClientView.test``, for Per-FedAvg's non-default ``adapt_on="test"``), so this leaves every
path to it open.  With ``sampling=True`` half the clients take part (:func:`half_sampled`): a
server that *selects* clients by reading the test split (their test loss) changes nothing
when everybody is selected, and is seen only then.

**Every phase** (issue 41: a read from round index 2 on passed a 2-round check).  Besides
replacing the test split in every round, each round t is also run once from the real run's
state with the test split replaced in that round only (the state after it must be the real
run's): a read is located to its round, and a read whose effect a consistently replaced split
would hide (a value cached at ``init`` compared later) is seen.  :func:`phase_rounds` gives
the rounds at which an algorithm's behaviour changes — declared by the class
(``phase_rounds(model)``) or in :data:`PHASES` (CFL's first split test, CGPFL-Heur's
selection round, PPFE's stage starts, FedALA's first ALA); :func:`phase_isolation` runs past
the last of them (and at least :data:`MIN_ROUNDS` rounds), with client sampling off and on.
What it cannot see: a read that starts after the rounds run and is declared by no phase.

Used by ``pflt verify``'s ``engine.train_test_isolation`` (every registered algorithm) and by
the ``isolation`` property of :func:`algorithms.testing.contract_battery` (a plugin's class).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, Callable

import torch

from algorithms.engine.base import State, hyperparameters
from algorithms.engine.runner import run

#: history entries that are not training-side: the clock, and (by the runner's naming, which
#: the methods' diagnostics follow) the test-split numbers ``X_accuracy*`` and ``X_loss``
#: (PPFE's ``ensemble_accuracy`` / ``ensemble_loss``); ``X_train_loss`` is training-side
NOT_TRAINING_SIDE = ("wall_seconds",)


def is_test_side(key: str) -> bool:
    """True for a history entry that may change with the test split: ``*_accuracy*``,
    ``*_loss`` but not ``*_train_loss``, and ``wall_seconds``."""
    if key in NOT_TRAINING_SIDE:
        return True
    if key.endswith("_train_loss"):
        return False
    return key.endswith("_loss") or "_accuracy" in key


def with_test_replaced(fed, seed: int = 0):
    """``fed`` with another test split: its labels permuted (one permutation of all test
    samples, so the clients' label counts change too; shifted by one class instead when a
    permutation changes nothing) and its features replaced by Gaussian noise with the test
    features' own mean and standard deviation (the losses stay in the range of the real
    data: the runner's divergence stop compares them with the round-0 test loss).  Offsets
    and counts are kept; the train split is the same object."""
    from synthetic.federation import Federation, Split

    gen = torch.Generator().manual_seed(int(seed) + 1_000_003)
    test = fed.test
    y = test.y.cpu()
    labels = y[torch.randperm(y.numel(), generator=gen)]
    if torch.equal(labels, y):
        labels = (y + 1) % fed.num_classes
    x = test.x.cpu()
    scale = x.std() if x.numel() > 1 else torch.ones((), dtype=x.dtype)
    noise = torch.randn(x.shape, generator=gen, dtype=x.dtype) * scale + x.mean()
    new = Split(noise.to(test.x.device), labels.to(test.y.device), test.offsets, test.counts)
    return Federation(fed.train, new, fed.num_classes, fed.name)


def _has_sampling(alg) -> bool:
    return any(f.name == "clients_per_round" for f in hyperparameters(type(alg)))


def every_client(alg, num_clients: int):
    """``alg`` with ``clients_per_round = N`` when it has that field (see the module)."""
    if _has_sampling(alg):
        return dataclasses.replace(alg, clients_per_round=num_clients)
    return alg


def half_sampled(alg, num_clients: int):
    """``alg`` with ``clients_per_round = max(1, N // 2)`` when it has that field, else
    ``None`` (an algorithm without client sampling has no selection to read the test by)."""
    if _has_sampling(alg) and num_clients >= 2:
        return dataclasses.replace(alg, clients_per_round=max(1, num_clients // 2))
    return None


#: at least this many rounds (indices 0..5): a read from round 5 on is inside them
MIN_ROUNDS = 6

#: the rounds (0-based) at which a registered algorithm's behaviour changes, by its name,
#: for algorithms that do not declare ``phase_rounds(model)`` themselves
PHASES: dict[str, Callable[[Any, Any], tuple[int, ...]]] = {
    # CFL: no split test before split_after (the authors' warm-up), then every round
    "cfl": lambda a, m: (a.split_after,),
    # CGPFL-Heur: K̂ chosen and frozen in select_round; the round after runs with K̂ contexts
    "cgpfl-heur": lambda a, m: (a.select_round, a.select_round + 1),
    # PPFE: each stage's first round (between-stage statistics and reweighting)
    "ppfe": lambda a, m: tuple(itertools.accumulate(a.schedule(m))),
    # FedALA: a client's first ALA (ala_start_steps) differs from the later ones (ala_steps)
    "fedala": lambda a, m: (0, 1),
}


def phase_rounds(alg, model) -> tuple[int, ...]:
    """The rounds (0-based, sorted) at which ``alg``'s behaviour changes: its own
    ``phase_rounds(model)`` if it declares one, else :data:`PHASES` by name, else ``(0,)``."""
    own = getattr(alg, "phase_rounds", None)
    if callable(own):
        rounds = own(model)
    else:
        rule = PHASES.get(getattr(alg, "name", ""))
        rounds = rule(alg, model) if rule else (0,)
    return tuple(sorted({int(r) for r in rounds}))


def isolation_rounds(alg, model, minimum: int = MIN_ROUNDS) -> int:
    """Rounds that run past the last phase change (one full round after it) and at least
    ``minimum``."""
    return max(int(minimum), max(phase_rounds(alg, model), default=0) + 2)


def state_differences(a: State, b: State) -> list[str]:
    """The names of the entries (``model name.key`` / ``tensor name``) in which the states
    ``a`` and ``b`` differ in shape or in any bit."""
    out = []
    for kind, x, y in (("model", a.models, b.models), ("tensor", a.tensors, b.tensors)):
        for name in sorted(set(x) | set(y)):
            if name not in x or name not in y:
                out.append(f"{kind} {name} (only in one run)")
                continue
            pairs = ([(f"{name}.{k}", x[name].get(k), y[name].get(k))
                      for k in sorted(set(x[name]) | set(y[name]))] if kind == "model"
                     else [(name, x[name], y[name])])
            for label, u, v in pairs:
                if u is None or v is None or u.shape != v.shape or not torch.equal(u, v):
                    out.append(f"{kind} {label}")
    return out


def history_differences(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    """The training-side entries (not :func:`is_test_side`) in which two histories differ,
    each with the first round it differs at (values compared as JSON, as the history is
    saved: floats to the last bit, a NaN equal to a NaN)."""
    out = [f"history has {len(a)} and {len(b)} entries"] if len(a) != len(b) else []
    seen: set[str] = set()
    for ea, eb in zip(a, b):
        for k in sorted(k for k in set(ea) | set(eb) if not is_test_side(k) and k not in seen):
            if json.dumps(ea.get(k)) != json.dumps(eb.get(k)):
                seen.add(k)
                out.append(f"round {ea.get('round')}: history {k!r}")
    return out


def isolation_differences(alg, fed, model, *, rounds: int = 2, seed: int = 0,
                          sampling: bool = False, one_round: bool = True) -> list[str]:
    """What differs between runs of ``alg`` (every client taking part; ``sampling``: half of
    them, :func:`half_sampled`) on ``fed`` and on ``fed`` with its test split replaced
    (:func:`with_test_replaced`): state entries after ``init`` and after each of ``rounds``
    rounds, and training-side history entries, each named once with the first place it
    differs; with ``one_round`` also the state after each round t run from the real run's
    state with the test split replaced in round t only ("test replaced in round t only: …").
    Empty: ``alg`` keeps train and test apart."""
    if sampling:
        alg = half_sampled(alg, fed.num_clients)
        if alg is None:
            return []
    else:
        alg = every_client(alg, fed.num_clients)
    other = with_test_replaced(fed, seed)
    start = alg.init(fed, model, seed)
    out = [f"init: {d}" for d in state_differences(start, alg.init(other, model, seed))]
    states: dict[str, list[State]] = {"real": [], "replaced": []}
    history = {}
    for label, f in (("real", fed), ("replaced", other)):
        history[label] = run(alg, f, model, rounds=rounds, seed=seed, progress=False,
                             on_round=states[label].append).history.entries
    for a, b in zip(states["real"], states["replaced"]):
        out += [f"round {a.round}: {d}" for d in state_differences(a, b)]
    out += history_differences(history["real"], history["replaced"])
    if one_round:
        before = [start] + states["real"][:-1]
        for t, (s0, s1) in enumerate(zip(before, states["real"])):
            if s0.round != t:   # the runner's states are not one per round: nothing to pair
                break
            alone = alg.round(s0, other, model)
            out += [f"test replaced in round {t} only: round {s1.round}: {d}"
                    for d in state_differences(s1, alone)]
    first: dict[str, str] = {}
    for d in out:                   # each entry once, where it first differs
        first.setdefault(d.split(": ", 1)[-1] if ": " in d else d, d)
    return list(first.values())


def phase_isolation(alg, fed, model, *, seed: int = 0, minimum: int = MIN_ROUNDS
                    ) -> tuple[int, tuple[int, ...], list[str]]:
    """``(rounds, phases, differences)``: :func:`isolation_differences` over
    :func:`isolation_rounds` rounds (past every phase change of :func:`phase_rounds`), with
    every client taking part and again with half of them sampled (each difference prefixed
    by ``"S = N: "`` or ``"S = N/2: "``)."""
    rounds = isolation_rounds(alg, model, minimum)
    phases = phase_rounds(alg, model)
    out = [f"S = N: {d}" for d in isolation_differences(alg, fed, model, rounds=rounds,
                                                         seed=seed)]
    out += [f"S = N/2: {d}" for d in isolation_differences(alg, fed, model, rounds=rounds,
                                                           seed=seed, sampling=True)]
    return rounds, phases, out
