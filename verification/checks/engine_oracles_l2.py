"""The engine equals its per-client oracles with an ℓ2 term in the model (issue 41: no
identity check ran a non-default ``l2``, so the engine's local and proximal steps with
``l2/2 Σ‖W‖²`` were compared with nothing).

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
    """Every oracle outside :data:`OPEN` with ℓ2 > 0: the engine equals it after every round."""
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
