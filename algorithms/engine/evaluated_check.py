"""The boundary between an algorithm's ``evaluated(state)`` and the evaluation: every model it
returns must have the parameters of the model that evaluates it — the same names, each
``[1 or N, *shape]`` with the model's shape, the data's floating dtype and device — else one
line naming the algorithm (a plugin's, typically), the model, the parameter, what was found
and what was expected.  Without it a plugin returning a float64 model on float32 data, or a
layer one column short, surfaced as a torch traceback from deep inside the evaluation
(``self and mat2 must have the same dtype``, ``index 7 is out of bounds``; issue 43).

The expected shapes come from the model's own ``init_single`` (one draw, cached on the model
object); a model without one (FedEM's mixture wrapper) is checked for dtype, device and the
leading dimension only, and a parameter dict that predicts by itself (``logits``, kNN-Per)
is not checked.
"""

from __future__ import annotations

import torch

__all__ = ["EvaluatedModels", "check_evaluated", "expected_shapes"]

_CACHE = "_pflt_expected_shapes"


class EvaluatedModels(dict):
    """``{name: params}`` as ``evaluated(state)`` returned it, with ``who``: the algorithm
    that returned it (for the messages)."""

    who: str = ""

    def __init__(self, models: dict, who: str):
        super().__init__(models)
        self.who = who


def expected_shapes(model) -> dict[str, tuple[int, ...]] | None:
    """``{parameter: shape of one copy}`` of ``model`` (``None``: the model has no
    ``init_single`` of its own)."""
    from algorithms.engine.model_base import Model

    cached = getattr(model, _CACHE, None)
    if cached is not None:
        return cached
    if not isinstance(model, Model) or type(model).init_single is Model.init_single:
        return None
    draw = model.init_single(torch.Generator().manual_seed(0))
    shapes = {k: tuple(v.shape) for k, v in draw.items()}
    try:
        object.__setattr__(model, _CACHE, shapes)
    except (AttributeError, TypeError):      # a model with __slots__: drawn each time
        pass
    return shapes


def _shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_evaluated(model, models: dict, split) -> None:
    """One-line ``ValueError`` unless every model of ``models`` fits ``model`` on ``split``
    (module docstring)."""
    who = getattr(models, "who", "")
    n = split.num_clients
    x = split.x
    want = expected_shapes(model)
    for name, params in models.items():
        if hasattr(params, "logits"):
            continue
        at = (f"algorithm {who}: evaluated(state)[{name!r}]" if who else f"model {name!r}")
        if want is not None and set(params) != set(want):
            missing, extra = sorted(set(want) - set(params)), sorted(set(params) - set(want))
            raise ValueError(f"{at} does not have the parameters of {type(model).__name__}: "
                             f"missing {missing or 'none'}, unknown {extra or 'none'}")
        for key, v in params.items():
            if x.is_floating_point() and v.dtype != x.dtype:
                raise ValueError(f"{at}[{key!r}] has dtype {v.dtype}; the data and the model "
                                 f"are {x.dtype}")
            if v.device != x.device:
                raise ValueError(f"{at}[{key!r}] is on {v.device}; the data are on {x.device}")
            if v.dim() < 1 or v.shape[0] not in (1, n):
                raise ValueError(f"{at}[{key!r}] has shape {_shape(v.shape)}: its leading "
                                 f"dimension must be 1 (one model for all) or N = {n}")
            if want is not None and tuple(v.shape[1:]) != want[key]:
                raise ValueError(f"{at}[{key!r}] has shape {_shape(v.shape)}; "
                                 f"{type(model).__name__} expects "
                                 f"{_shape([f'1 or N = {n}', *want[key]])}")
