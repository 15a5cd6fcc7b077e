"""The algorithm contract, the one registry, and small helpers on batched parameters.

An algorithm is a frozen dataclass of hyper-parameters (validated in ``__post_init__``)
with three methods:

* ``init(federation, model, seed) -> State`` — the initial state;
* ``round(state, federation, model) -> State`` — communication round ``t = state.round``,
  returning a *new* state with ``round = t + 1`` (no hidden mutation, so runs can be
  replayed, checkpointed and compared).  No algorithm writes ``round`` itself: it defines
  its client/server split — ``first_phase``, ``client_update``, ``server_aggregate`` — and
  :class:`algorithms.engine.contract.Algorithm` derives ``round`` from it (see
  :mod:`algorithms.engine.contract`; the Flower adapter runs the same functions);
* ``evaluated(state) -> dict[str, Params]`` — the models to evaluate, each under its own
  name (``personalized``, ``global``, ``local``, …), each with leading dimension N.

Optionally ``diagnostics(state, federation, model) -> dict[str, float]`` reports the
quantities the theorems talk about. Per-round randomness comes from
:func:`round_generator` ``(state.seed, t, stream)``, so a round is reproducible on its own.

Register with ``@register("name")`` — in a module of this package, or in a module of your
own loaded as a plugin (:mod:`pfl_theory.plugins`, docs/extending.md); :func:`get_algorithm`
looks names up, with a clear error listing the registered ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from pfl_theory.validation import positive, positive_int

Params = dict[str, torch.Tensor]

_REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator adding an algorithm under ``name``: a non-empty string without
    blanks (it is an option value, ``--algorithm NAME``, and a directory name in sweeps),
    else a one-line ``ValueError``."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name) \
            or not name.isprintable():
        raise ValueError(f"algorithm name {name!r} refused: give a non-empty name without "
                         "blanks or control characters (e.g. 'my-fedprox')")

    def deco(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"algorithm {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return deco


def registry() -> dict[str, type]:
    """All registered algorithms: imports every module of :mod:`algorithms.methods` (every
    family sub-package) once, then the user's plugins (``PFLT_PLUGINS``, ``pflt --plugin``,
    the ``pfl_theory.algorithms`` entry points: :mod:`pfl_theory.plugins`)."""
    import importlib
    import pkgutil
    from pathlib import Path

    from pfl_theory.plugins import load_plugins

    # walk the methods directory itself (not ``import algorithms.methods``: no loop with the
    # package __init__ files); each family is a sub-package, each method module a leaf
    methods = Path(__file__).resolve().parents[1] / "methods"
    for info in pkgutil.walk_packages([str(methods)], prefix="algorithms.methods."):
        if not info.ispkg:
            importlib.import_module(info.name)
    load_plugins()
    return dict(sorted(_REGISTRY.items()))


def get_algorithm(name: str) -> type:
    """The registered algorithm class ``name``; a ``ValueError`` lists the registered ones."""
    reg = registry()
    if name not in reg:
        raise ValueError(f"unknown algorithm {name!r}; registered: {', '.join(reg)}")
    return reg[name]


def hyperparameters(cls: type) -> list[dataclasses.Field]:
    """The hyper-parameter fields of an algorithm class (with ``metadata['help']``)."""
    return [f for f in dataclasses.fields(cls) if f.init]


NO_SYMBOL = "—"


def hp(default: Any, help: str, check: Callable[[str, Any], Any] | None = None, *,
       symbol: str = "") -> Any:
    """A documented hyper-parameter field; ``check(name, value)`` (e.g.
    :func:`pfl_theory.validation.positive`) validates it in :func:`validate_hyperparameters`;
    ``symbol`` is the paper's symbol for it (e.g. ``"η"``, ``"λ"``, ``"β"``; :data:`NO_SYMBOL`
    for a toolkit or reading choice the paper has no symbol for), shown by ``pflt list`` and
    ``pflt run --algorithm X --help``.  The same name may stand for different symbols in
    different algorithms (``lr`` is η in FedAvg, pFedMe's outer η, β in CGPFL and
    Per-FedAvg): the symbol and the class docstring say which."""
    return field(default=default, metadata={"help": help, "check": check, "symbol": symbol})


def batch_size_hp(default: int = 20) -> Any:
    """The mini-batch size field ``|D|`` shared by the algorithms."""
    return hp(default, "mini-batch size |D|", check=positive_int, symbol="|D|")


def local_lr_hp(default: float = 0.02) -> Any:
    """The local SGD learning-rate field ``η`` shared by the algorithms."""
    return hp(default, "local SGD learning rate η", check=positive, symbol="η")


def local_rounds_hp(default: int = 20) -> Any:
    """The local-steps field ``R`` (one mini-batch each) shared by the algorithms."""
    return hp(default, "local SGD steps R per round (one mini-batch each)", check=positive_int,
              symbol="R")


def clients_per_round_hp(default: int = 10, help: str = "clients S sampled per round") -> Any:
    """The client-sampling field ``S`` shared by the algorithms (``S ≤ N`` is checked in
    ``init`` by :func:`check_clients_per_round`)."""
    return hp(default, help, check=positive_int, symbol="S")


def one_of(*choices: str) -> Callable[[str, Any], str]:
    """A ``check`` accepting only ``choices``."""
    def check(name: str, value: Any) -> str:
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    return check


def validate_hyperparameters(obj: Any) -> None:
    """Run the ``check`` of every hyper-parameter field of ``obj`` (call from
    ``__post_init__``); a bad value raises ``ValueError`` naming the field."""
    for f in dataclasses.fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            check(f.name, getattr(obj, f.name))


@dataclass(frozen=True)
class State:
    """Generic algorithm state: named parameter dicts, named tensors, and the round.

    ``models`` holds parameter dicts (e.g. ``global`` ``[1, ...]``, ``personalized``
    ``[N, ...]``); ``tensors`` other arrays (assignments, weights, …)."""

    round: int
    seed: int
    models: dict[str, Params]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def replace(self, **changes) -> "State":
        return dataclasses.replace(self, **changes)

    def next(self, models: dict[str, Params], tensors: dict[str, torch.Tensor] | None = None
             ) -> "State":
        """The state of the following round."""
        return State(self.round + 1, self.seed, models, self.tensors if tensors is None else tensors)

    def generator(self, stream: int = 0) -> torch.Generator:
        """This round's CPU generator for ``stream``."""
        return round_generator(self.seed, self.round, stream)

    def is_finite(self) -> bool:
        return all(bool(torch.isfinite(v).all()) for p in self.models.values()
                   for v in p.values()) and all(
            bool(torch.isfinite(v).all()) for v in self.tensors.values()
            if v.is_floating_point())


def round_generator(seed: int, t: int, stream: int = 0) -> torch.Generator:
    """A CPU generator for round ``t`` of a run with ``seed`` (independent streams)."""
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(t)) * 7 + int(stream))


# ---- helpers on parameter dicts ------------------------------------------------------

def broadcast(params: Params, n: int) -> Params:
    """``[1, ...]`` → ``[n, ...]`` copies."""
    return {k: v.expand(n, *v.shape[1:]).clone() for k, v in params.items()}


def select(params: Params, index: torch.Tensor) -> Params:
    """The rows ``index`` of every parameter (e.g. the sampled clients)."""
    return {k: v[index] for k, v in params.items()}


def weighted_mean(params: Params, weights: torch.Tensor) -> Params:
    """``Σ_i w_i θ_i / Σ_i w_i`` over the leading dimension → ``[1, ...]``."""
    w = weights.to(next(iter(params.values())).dtype)
    w = w / w.sum()
    return {k: torch.tensordot(w, v, dims=1).unsqueeze(0) for k, v in params.items()}


def sq_distance(a: Params, b: Params) -> torch.Tensor:
    """Per-row squared Euclidean distance ``‖a_i − b_i‖²`` (b may be ``[1, ...]``)."""
    return sum(((a[k] - b[k]) ** 2).flatten(1).sum(1) for k in a)


def flatten(params: Params) -> torch.Tensor:
    """``[N, d]`` concatenation of all parameters (for clustering, distances)."""
    return torch.cat([v.flatten(1) for v in params.values()], dim=1)


def unflatten(flat: torch.Tensor, like: Params) -> Params:
    """Inverse of :func:`flatten`: ``[N, d]`` back to the shapes of ``like``."""
    out, start = {}, 0
    for k, v in like.items():
        size = v[0].numel()
        out[k] = flat[:, start:start + size].reshape(flat.shape[0], *v.shape[1:])
        start += size
    return out


def check_clients_per_round(s: int, fed: Any) -> None:
    """``S ≤ N`` or a clear ``ValueError`` (called from ``init``, where N is known)."""
    if s > fed.num_clients:
        raise ValueError(f"clients_per_round S={s} > number of clients N={fed.num_clients}")


def sample_clients(n: int, s: int, gen: torch.Generator) -> torch.Tensor:
    """``s`` distinct clients uniformly at random, sorted (CPU)."""
    return torch.sort(torch.randperm(n, generator=gen)[:s]).values
