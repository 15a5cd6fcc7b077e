"""No registered algorithm reads a client's test split while it trains (issue 34, item 3).

Every registered algorithm — the built-in ones and any plugin — runs past the last round at
which its behaviour changes (:func:`algorithms.isolation.phase_rounds`), with every client
taking part and with half of them sampled (a selection of clients by their test loss shows
only then), twice on a planted
federation (:func:`algorithms.testing.planted_federation`, float64), the second time with
its test split replaced (labels permuted, features Gaussian noise:
:func:`algorithms.isolation.with_test_replaced`), every client taking part in every round;
the states after ``init`` and after each round, and every training-side history entry
(train losses, diagnostics), must agree bit for bit (:func:`algorithms.isolation.
isolation_differences`).  Held-out splits an algorithm documents (FedFomo's validation rows,
pFedFDA's cross-validation folds, PPFE's between-stage statistics) are parts of the training
split, so they pass; a read of the test split anywhere in ``init``, ``first_phase``,
``client_update``, ``server_aggregate`` or ``diagnostics``' training-side entries fails.

The check can fail, and shows it on every run: its positive control, Per-FedAvg with
``adapt_on="test"`` (the public pFedMe code's evaluation, which adapts the personalized model
on test mini-batches — not the paper's method, off by default), must be flagged; if it is
not, the check is blind and raises (ERROR).
"""

from __future__ import annotations

from algorithms.engine.base import hyperparameters, registry
from algorithms.engine.models import DNN
from algorithms.isolation import isolation_differences, phase_isolation
from algorithms.testing import build, planted_federation
from verification.core.registry import Context, Outcome, check

#: a few steps per phase: isolation needs every code path run, not learning
STEPS = {"local_rounds": 2, "inner_steps": 2, "head_steps": 2, "finetune_steps": 2,
         "batch_size": 4, "num_contexts": 2, "hn_hidden": 8}
#: per algorithm, what brings a path into the first rounds that would come later: PPFE's
#: stage transition (the clients' weighted errors and reweighting on their own data) at the
#: start of round 2; CFL's split test from round 1
PATHS = {"ppfe": {"stages": 2, "stage_fractions": "1,1", "total_rounds": 2},
         "cfl": {"split_after": 1}}
#: the positive control: a configuration that reads the test split by design
CONTROL = ("perfedavg", {"adapt_on": "test"})


def configured(cls: type, **extra):
    """``cls`` with the contract battery's small settings, then :data:`STEPS` and its
    :data:`PATHS` entries for the fields it has, then ``extra``."""
    names = {f.name for f in hyperparameters(cls)}
    over = {**STEPS, **PATHS.get(getattr(cls, "name", ""), {}), **extra}
    return build(cls, **{k: v for k, v in over.items() if k in names})


def differing_algorithms(fed, model, minimum: int, seed: int
                         ) -> tuple[dict[str, list[str]], dict[str, tuple[int, tuple]]]:
    """``({name: differences}, {name: (rounds run, phase rounds)})`` over every registered
    algorithm (:func:`algorithms.isolation.phase_isolation`: past its last phase change,
    client sampling off and on, the test split replaced in all rounds and in one at a time)."""
    out, runs = {}, {}
    for name, cls in registry().items():
        try:
            rounds, phases, diff = phase_isolation(configured(cls), fed, model, seed=seed,
                                                   minimum=minimum)
        except Exception as exc:          # name the algorithm that broke the check
            raise RuntimeError(f"{name}: {type(exc).__name__}: {exc}") from exc
        runs[name] = (rounds, phases)
        if diff:
            out[name] = diff
    return out, runs


@check("engine.train_test_isolation", paper="every registered algorithm (toolkit contract)",
       reference="train/test isolation: states and training-side histories bit-identical when "
                 "only the test split changes (labels permuted, features noise), in every "
                 "round and in each round alone, past every phase change, clients sampled or not",
       kind="identity", tolerance=0.0,
       tolerance_reason="bit for bit: the two runs do the same float64 operations on the same "
                        "training data unless the test split is read",
       quick={"clients": 4, "samples": 24, "rounds": 6},
       full={"clients": 6, "samples": 80, "rounds": 8})
def train_test_isolation(ctx: Context) -> Outcome:
    """Every registered algorithm, past the last round at which its behaviour changes
    (algorithms/isolation.py ``phase_rounds``) and at least ``rounds`` rounds, every client
    taking part and half of them sampled: the states and the training-side history do not
    change when the test split does, in all rounds or in any one round."""
    p = ctx.params
    fed = planted_federation(clients=p["clients"], samples=p["samples"])
    model = DNN(5, 3, hidden=4)
    name, extra = CONTROL
    control = isolation_differences(configured(registry()[name], **extra), fed, model,
                                    rounds=2, seed=ctx.seed)
    if not control:
        raise RuntimeError(f"the positive control {name} {extra} (reads test mini-batches) was "
                           "not flagged: the isolation check cannot see a test read")
    bad, runs = differing_algorithms(fed, model, p["rounds"], ctx.seed)
    n = len(registry())
    found = "; ".join(f"{k}: {', '.join(v[:3])}" for k, v in bad.items())
    longest = max(r for r, _ in runs.values())
    phased = ", ".join(f"{k} {list(ph)}" for k, (_, ph) in sorted(runs.items()) if ph != (0,))
    return Outcome(
        measured=len(bad), theoretical=0, holds=not bad,
        detail=(f"{n - len(bad)}/{n} algorithms isolated over {p['rounds']}–{longest} rounds "
                f"(N = {p['clients']}: every client each round, and N/2 sampled; the test "
                f"split replaced in every round and in each round alone; phase changes at "
                f"rounds {phased})"
                + (f"; reading the test split: {found}" if bad else "")
                + f"; positive control {name} {extra} flagged ({len(control)} entries differ)"),
        extra={"algorithms": n, "differing": bad, "control_differences": control,
               "rounds": {k: r for k, (r, _) in runs.items()},
               "phases": {k: list(ph) for k, (_, ph) in runs.items()}})
