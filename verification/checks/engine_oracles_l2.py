"""The engine equals its per-client oracles in non-default settings (issue 41: no identity
check ran a non-default ``l2`` or a non-default string/boolean hyper-parameter value, so the
engine's steps there were compared with nothing).

``engine.oracles_with_l2`` — with an ℓ2 term in the model:

Every registered oracle (:mod:`verification.oracles`) runs again on its own setting with the
model's ``l2`` set to :data:`L2`; the oracle's loss adds ``l2/2 Σ‖W‖²`` over the weight
matrices on its side (:func:`verification.oracles.common.loss`, written from the models'
documented term, not their code).  Left out, with the reason, are the algorithms whose oracle
writes some losses of its own without the ℓ2 term (:data:`OPEN`), and models without an
``l2`` field.
"""

from __future__ import annotations

import dataclasses

from verification.core.registry import Context, Outcome, check

#: the ℓ2 coefficient of the runs (non-default: the models' default is 0)
L2 = 0.05
#: oracles that differ with ℓ2 > 0 by 7e-3 … 3e-2 (measured 2026-12-08, quick size): each
#: writes some of its losses directly (``F.cross_entropy`` in its module, not
#: :func:`verification.oracles.common.loss`), without the ℓ2 term the engine's model adds to
#: every loss — the oracle, not the engine, is incomplete there; not extended in this change
OPEN = {name: f"its oracle writes losses without the l2 term ({where})" for name, where in (
    ("fedala", "oracles/decoupled.py"), ("fedrod", "oracles/decoupled.py"),
    ("fedamp", "oracles/clustered_soft.py"), ("fedem", "oracles/clustered_soft.py"),
    ("fedfomo", "oracles/clustered_soft.py"), ("fedpac", "oracles/prototypes.py"),
    ("fedproto", "oracles/prototypes.py"))}


def with_l2(setting, l2: float = L2):
    """``setting`` whose model carries ``l2`` (``None`` model when it has no such field)."""
    def make(seed):
        fed, model = setting(seed)
        if not any(f.name == "l2" for f in dataclasses.fields(model)) \
                if dataclasses.is_dataclass(model) else True:
            return fed, None
        return fed, dataclasses.replace(model, l2=l2)
    return make


@check("engine.oracles_with_l2", paper="every registered algorithm (toolkit contract)",
       reference="each <algorithm>.engine_equals_oracle again with the model's l2 = 0.05",
       kind="identity", tolerance=1e-10,
       tolerance_reason="as the oracle checks: float64, batched against one-client kernels "
                        "over 2 rounds (~1e-15 relative); a changed step moves it by > 1e-4",
       quick={"rounds": 2}, full={"rounds": 3})
def oracles_with_l2(ctx: Context) -> Outcome:
    """Every oracle with ℓ2 > 0, except those whose oracle writes losses without the ℓ2 term
    (named in the result): the engine equals it after every round."""
    import verification.checks.engine_oracles  # noqa: F401  (registers the oracles)
    from verification.oracles.registry import compare, oracles

    devs, skipped = {}, {}
    for name, oracle in oracles().items():
        if name in OPEN:
            skipped[name] = OPEN[name]
            continue
        setting = with_l2(oracle.setting)
        if setting(ctx.seed)[1] is None:
            skipped[name] = "its model has no l2 field"
            continue
        devs[name], _ = compare(dataclasses.replace(oracle, setting=setting), seed=ctx.seed,
                                rounds=ctx.params["rounds"])
    worst = max(devs.values())
    bad = {k: v for k, v in devs.items() if not v <= ctx.tolerance}
    return Outcome(
        measured=worst, theoretical=0.0, holds=not bad,
        detail=(f"{len(devs) - len(bad)}/{len(devs)} algorithms equal their oracle with l2 = "
                f"{L2} over {ctx.params['rounds']} rounds (max relative difference "
                f"{worst:.2e})" + (f"; differing: " + ", ".join(f"{k} {v:.2e}" for k, v
                                                             in bad.items()) if bad else "")
                + "; left out: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())),
        extra={"deviations": devs, "left_out": skipped, "l2": L2})


#: non-default values the oracles do not write (their oracle follows the default only);
#: measured 2026-12-08, quick size: both differ by > 5e-2
NOT_MODELLED = {
    ("pfedme", "train_clients", "sampled"): "the oracle writes Algorithm 1 (every client "
    "trains); 'sampled' keeps the other clients' old rows (its global model equals 'all' "
    "bit for bit: tests/algorithms)",
    ("fedbn", "aggregation", "weighted"): "the FedBN oracle averages uniformly only",
}


def choice_values(field, current) -> list:
    """The other values of a boolean hyper-parameter or of one checked by
    :func:`algorithms.engine.base.one_of` (its choices read from the check's closure)."""
    if isinstance(current, bool):
        return [not current]
    chk = field.metadata.get("check")
    if chk is not None and getattr(chk, "__qualname__", "").startswith("one_of."):
        cells = [c.cell_contents for c in (chk.__closure__ or ())]
        choices = next((c for c in cells if isinstance(c, tuple)), ())
        return [c for c in choices if c != current]
    return []


@check("engine.oracles_hyperparameter_values",
       paper="every registered algorithm (toolkit contract)",
       reference="each <algorithm>.engine_equals_oracle again with every other value of its "
                 "boolean and one-of string hyper-parameters",
       kind="identity", tolerance=1e-10,
       tolerance_reason="as the oracle checks: float64, batched against one-client kernels "
                        "over 2 rounds (~1e-15 relative); a changed step moves it by > 1e-4",
       quick={"rounds": 2}, full={"rounds": 3})
def oracles_hyperparameter_values(ctx: Context) -> Outcome:
    """Every oracle with each non-default boolean / one-of value of its algorithm (one at a
    time, the oracle's other settings kept), except the values the oracles do not model
    (named in the result)."""
    import verification.checks.engine_oracles  # noqa: F401  (registers the oracles)
    from algorithms.engine.base import hyperparameters
    from verification.oracles.registry import compare, oracles

    devs, skipped = {}, {}
    for name, oracle in oracles().items():
        alg = oracle.make()
        for f in hyperparameters(type(alg)):
            for value in choice_values(f, getattr(alg, f.name)):
                key = (name, f.name, value)
                if key in NOT_MODELLED:
                    skipped[f"{name} {f.name}={value!r}"] = NOT_MODELLED[key]
                    continue
                variant = dataclasses.replace(
                    oracle, make=lambda a=alg, n=f.name, v=value: dataclasses.replace(a, **{n: v}))
                devs[f"{name} {f.name}={value!r}"], _ = compare(
                    variant, seed=ctx.seed, rounds=ctx.params["rounds"])
    worst = max(devs.values())
    bad = {k: v for k, v in devs.items() if not v <= ctx.tolerance}
    return Outcome(
        measured=worst, theoretical=0.0, holds=not bad,
        detail=(f"{len(devs) - len(bad)}/{len(devs)} non-default values equal their oracle "
                f"({', '.join(devs)}; max relative difference {worst:.2e})"
                + (f"; differing: " + ", ".join(f"{k} {v:.2e}" for k, v in bad.items())
                   if bad else "")
                + "; not modelled by the oracle: " + "; ".join(f"{k} ({v})" for k, v
                                                                in skipped.items())),
        extra={"deviations": devs, "not_modelled": skipped})
