"""Options of ``pflt run`` / ``pflt sweep``: the parser, TOML configs, resolution.

``resolve(args)`` turns parsed arguments into one ``options`` dict: command-line options
that were given explicitly override the ``--config`` file, which overrides the defaults;
``--resume DIR`` takes the saved options of that run (explicit options may only change
``rounds``, ``checkpoint_every``, ``threads``, ``no_progress``; anything else that differs
from the saved run — another algorithm, other hyper-parameters — is an error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pflt.cli import UserError
# the data options and the saved options live in their own modules; their names are part of
# this module's interface (``opts.data_spec``, ``opts.saved``, ``opts.read_saved`` …)
from pflt.commands import _run_data, _run_saved
from pflt.commands._run_data import (FEATURE_SHIFT_ONLY, LABEL_SKEW_ONLY, SYNTHETIC_ONLY,
                                     data_dict, data_spec)
from pflt.commands._run_saved import NOT_SAVED, SAVED_REQUIRED, saved

__all__ = ["FEATURE_SHIFT_ONLY", "LABEL_SKEW_ONLY", "SYNTHETIC_ONLY", "NOT_SAVED",
           "SAVED_REQUIRED", "check_data_options", "data_dict", "data_spec", "read_saved",
           "saved", "add_options", "resolve", "load_config", "coerce", "help_text",
           "default_rounds", "schedule_note", "hyperparameter_options", "MODELS",
           "RESUMABLE", "DEFAULT_ROUNDS", "STEP_SUFFIXES", "MAX_STEPS"]
from pflt.out_lock import out_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODELS = ["mlr", "dnn", "mlp", "mlp-bn", "cnn", "cnn3", "resnet18-gn"]
#: ``--rounds`` of an algorithm without a schedule of its own (:func:`default_rounds`)
DEFAULT_ROUNDS = 50
RESUMABLE = {"rounds", "checkpoint_every", "threads", "no_progress", "resume", "config",
             "overwrite", "client_chunk", "memory_budget"}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _bool(text: str) -> bool:
    if str(text).lower() in ("1", "true", "yes", "on"):
        return True
    if str(text).lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _cap(text: str):
    """``--max-client-size``: an integer, ``auto`` or ``none``."""
    low = str(text).strip().lower()
    if low in ("auto", "none"):
        return low
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, auto or none, got {text!r}")


def _widths(text: str):
    try:
        widths = tuple(int(w) for w in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or a comma list of ints, got {text!r}")
    return widths[0] if len(widths) == 1 else widths


def hyperparameter_options() -> dict[str, tuple[type, str, list[str]]]:
    """name → (type, help, algorithms having it), over all registered algorithms (their
    catalogue, :func:`pflt.catalog.algorithms`: no torch imported when it is cached)."""
    from pflt import catalog

    found: dict[str, tuple[type, str, list[str]]] = {}
    for info in catalog.algorithms():
        for h in info.hyperparameters:
            kind = type(h.default) if h.default is not None else str
            if h.name in found:
                found[h.name][2].append(info.name)
            else:
                found[h.name] = (kind, h.help, [info.name])
    return found


def add_options(p: argparse.ArgumentParser) -> None:
    """Every option of ``pflt run``: the common ones and every algorithm's hyper-parameters."""
    add_common_options(p)
    add_hyperparameter_options(p)


def add_common_options(p: argparse.ArgumentParser) -> None:
    """The options every algorithm shares (run, data)."""
    from pflt.catalog import algorithm_names

    g = p.add_argument_group("run")
    g.add_argument("--config", default=None, help="TOML file with any of these options")
    g.add_argument("--resume", default=None, metavar="DIR", help="continue the run saved in DIR")
    g.add_argument("--algorithm", default="pfedme", help=f"a registered algorithm, {len(algorithm_names())} in all: "
                   "pflt list algorithms (default: pfedme)")
    g.add_argument("--model", default=None, choices=MODELS, metavar="NAME",
                   help="mlr (default; mlp for layer-wise methods), dnn, mlp, mlp-bn (BatchNorm: "
                        "fedbn, fedavg, local), cnn (CGPFL: 2 conv+2 FC), cnn3 (PPFE: 2 conv+"
                        "3 FC), resnet18-gn (PLGU)")
    g.add_argument("--hidden", type=_widths, default=None,
                   help="dnn/cnn: one width (dnn 20; CGPFL 128); mlp/cnn3: comma list; "
                        "resnet18-gn: base width (64)")
    g.add_argument("--l2", type=float, default=0.0, help="ℓ2 coefficient of the model loss")
    g.add_argument("--rounds", type=int, default=None,
                   help=f"communication rounds T (default: the algorithm's own schedule where "
                        f"it has one — PPFE: --total-rounds, all its stages — else "
                        f"{DEFAULT_ROUNDS})")
    g.add_argument("--seed", type=int, default=0,
                   help="training seed: initialisation and per-round sampling (default 0)")
    g.add_argument("--data-seed", type=int, default=0,
                   help="data seed: generation, partition and train/test split (default 0: "
                        "the data stay fixed while --seed varies, as in the papers)")
    g.add_argument("--eval-every", type=int, default=1, help="evaluate every k rounds")
    g.add_argument("--checkpoint-every", type=int, default=None, help="checkpoint every k rounds")
    g.add_argument("--out", type=out_dir, default="runs/latest", help="output directory (default runs/latest)")
    g.add_argument("--overwrite", action="store_true",
                   help="replace another run's files in --out (default: refuse)")
    g.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="float type")
    g.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: PFLT_THREADS, else 1)")
    g.add_argument("--client-chunk", type=_positive_int, default=None, metavar="K",
                   help="train a round's clients K at a time: the same results, peak memory "
                        "grows with K instead of N (default: from --memory-budget)")
    g.add_argument("--memory-budget", type=_positive_float, default=None, metavar="GIB",
                   help="memory for training one chunk of clients, GiB (default: half the "
                        "available memory); sizes --client-chunk")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    d = p.add_argument_group("data")
    d.add_argument("--data", default="synthetic",
                   help="synthetic (default) | synthetic-iid | digits | mnist5k | NAME[:DIR] "
                        "for NAME mnist, fmnist, emnist[-SPLIT], cifar10, cifar100")
    d.add_argument("--clients", type=int, default=100, help="number of clients N (default 100)")
    d.add_argument("--synthetic-alpha", type=float, default=0.5, help="Synthetic(α, β): α")
    d.add_argument("--synthetic-beta", type=float, default=0.5, help="Synthetic(α, β): β")
    d.add_argument("--partition", default="label-skew",
                   choices=["label-skew", "dirichlet", "iid", "feature-shift", "cgpfl",
                            "pfedme", "ppfe", "plgu"],
                   help="of real data (default label-skew); feature-shift: IID, images "
                        "shifted per client; cgpfl, pfedme, ppfe, plgu: the papers' (no image "
                        "twice in a client; reuse across clients in summary.json)")
    d.add_argument("--classes-per-client", type=int, default=2, help="label-skew: labels per client")
    d.add_argument("--class-assignment", default="cyclic", choices=["cyclic", "random"],
                   help="label-skew: labels (i+j) mod C (default, spreads clients evenly) or "
                        "random")
    d.add_argument("--replace", type=_bool, default=False,
                   help="label-skew: draw samples with replacement (default false)")
    d.add_argument("--size-range", type=int, nargs=2, default=None, metavar=("LO", "HI"),
                   help="label-skew: sizes U[LO, HI] (default: fit to the data)")
    d.add_argument("--dirichlet-alpha", type=float, default=0.5, help="dirichlet concentration")
    d.add_argument("--shift-rotation", type=float, default=45.0, metavar="DEG",
                   help="feature-shift: rotations U[-DEG, DEG] (default: 45; 0 for non-images)")
    d.add_argument("--shift-contrast", type=float, default=2.0, metavar="F",
                   help="feature-shift: contrast in [1/F, F]")
    d.add_argument("--shift-noise", type=float, default=0.1, metavar="S",
                   help="feature-shift: noise std U[0, S]")
    d.add_argument("--train-fraction", type=float, default=0.75, help="per-client train share")
    d.add_argument("--standardize", type=_bool, default=False,
                   help="real data: standardise every pixel over the pool, (x - mean)/(std + "
                        "0.001), as pFedMe's generator (default false: bytes/255)")
    d.add_argument("--validation-fraction", type=float, default=0.0, metavar="F",
                   help="hold F of each client's training split out and evaluate on it "
                        "instead of the test split (tuning; default 0: the test split)")
    d.add_argument("--max-client-size", type=_cap, default="auto",
                   help="cap samples per client, applied while drawing synthetic data: an "
                        "integer; none (the paper's sizes); auto (default: none unless the "
                        "synthetic features exceed 1 GiB, then the largest cap that fits)")
    from pflt.commands._help import state_defaults

    state_defaults(g._group_actions + d._group_actions)


def add_hyperparameter_options(p: argparse.ArgumentParser) -> None:
    """One option per hyper-parameter name over all algorithms (``default=None``: the
    algorithm's own default applies unless given)."""
    h = p.add_argument_group("algorithm hyper-parameters (default: the algorithm's own)")
    for name, (kind, text, owners) in sorted(hyperparameter_options().items()):
        conv = _bool if kind is bool else kind
        h.add_argument(f"--{name.replace('_', '-')}", dest=f"hp_{name}", type=conv, default=None,
                       help=f"{text} [{', '.join(owners)}]")


def help_text(algorithm: str | None, description: str = "", *,
              config: dict[str, Any] | None = None, source: str = "") -> str:
    """``pflt run --help``: with ``algorithm``, the common options plus that algorithm's
    hyper-parameters with their defaults, paper symbols and citation; without, the common
    options and where to find the hyper-parameters (``pflt list algorithms``).

    ``config`` (a ``--config`` file read by :func:`load_config`, named ``source``): every
    option it sets shows that value, ``[source: value]``, after its help — the value the
    run takes unless the command line gives another."""
    from pflt import catalog

    config = config or {}
    p = argparse.ArgumentParser(prog="pflt run", add_help=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    add_common_options(p)
    for action in p._actions:
        if action.dest in config:
            action.help = f"{action.help} {_from(source, config[action.dest])}"
    if config:
        p.epilog = _epilog(f"[{source}: value]: the value set by --config {source}, used "
                           "unless the command line gives the option")
    if algorithm is None:
        p.description = description
        p.epilog = ("Hyper-parameters depend on the algorithm; each has its own option "
                    "(e.g. --lam, --lr).  Show one algorithm's options with their defaults:\n"
                    "  pflt run --algorithm NAME --help\nAll algorithms: pflt list algorithms")
        return p.format_help()
    info = catalog.described(algorithm)
    p.description = (f"{info.name}: {info.summary}\npaper: {info.paper or '-'}\n"
                     f"implementation: {info.qualname}")
    h = p.add_argument_group(f"{info.name} hyper-parameters")
    for hp in info.hyperparameters:
        symbol = f"{hp.shown_symbol}: " if hp.symbol else ""
        mine = config.get(f"hp_{hp.name}")
        h.add_argument(hp.option, metavar=type(hp.default).__name__.upper(),
                       help=f"{symbol}{hp.help} (default: {hp.default!r})".replace("%", "%%")
                       + ("" if mine is None else " " + _from(source, mine)))
    return p.format_help()


def _epilog(text: str) -> str:
    """``text`` as argparse prints it: argparse %-formats an epilog (or description) only
    when it holds ``%(prog)``, so then every ``%`` is doubled (a file named
    ``x%(prog)s%d.toml`` raised TypeError)."""
    escaped = text.replace("%", "%%")
    return escaped if "%(prog)" in escaped else text


def _from(source: str, value: Any) -> str:
    return f"[{source}: {value!r}]".replace("%", "%%")


def _explicit(argv: list[str]) -> set[str]:
    """Destinations of the options given explicitly in ``argv``."""
    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    add_options(parser)
    for action in parser._actions:
        action.default = argparse.SUPPRESS
        action.required = False
    ns, _ = parser.parse_known_args(argv)
    return set(vars(ns))


def _actions() -> dict[str, argparse.Action]:
    """dest → the argparse action of every ``pflt run`` option (for TOML values)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_options(parser)
    return {a.dest: a for a in parser._actions}


def coerce(dest: str, value: Any, action: argparse.Action | None, where: str) -> Any:
    """A config value converted and checked exactly as the command line would: through the
    option's ``type`` (given as text) and ``choices``; ``nargs`` options take a list, flags
    a boolean."""
    key = dest[3:] if dest.startswith("hp_") else dest
    flag = f"{key.replace('_', '-')} in {where}"
    if action is None:
        return value
    if isinstance(value, dict) or (isinstance(value, list) and action.nargs is None
                                   and action.type is not _widths):
        raise UserError(f"{flag} must be a single value, got {value!r}")
    if action.nargs == 0:  # store_true flag
        if not isinstance(value, bool):
            raise UserError(f"{flag} must be true or false, got {value!r}")
        return value
    if isinstance(value, list) and action.type is _widths:
        value = ",".join(str(v) for v in value)
    items = value if action.nargs not in (None, "?") else [value]
    if not isinstance(items, list) or (isinstance(action.nargs, int)
                                       and len(items) != action.nargs):
        raise UserError(f"{flag} must be a list of {action.nargs} values, got {value!r}")
    out = []
    for item in items:
        if isinstance(item, (dict, list)) or (isinstance(item, bool) and action.type is not _bool):
            raise UserError(f"{flag}: invalid value {item!r}")
        text = ("true" if item else "false") if isinstance(item, bool) else str(item)
        conv = action.type or str
        try:
            converted = conv(text)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise UserError(f"{flag}: invalid {getattr(conv, '__name__', 'value')} value "
                            f"{item!r} ({exc})") from None
        if action.choices is not None and converted not in action.choices:
            raise UserError(f"{flag}: invalid choice {item!r} (choose from "
                            f"{', '.join(map(str, action.choices))})")
        out.append(converted)
    return out if action.nargs not in (None, "?") else out[0]


def read_toml(path: Path, what: str = "sweep file") -> dict:
    """The TOML file ``path`` or a one-line :class:`UserError` (``what``: the file's role,
    in the message for a file nested too deeply — a 3,000-deep list is a RecursionError
    inside ``tomllib``)."""
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist")
    if not path.is_file():
        raise UserError(f"config {path} is not a file")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not a UTF-8 text (TOML) file") from None
    except RecursionError:
        raise UserError(f"{path} is nested too deeply to be a {what}") from None


def load_config(path: str | Path, valid: set[str]) -> dict[str, Any]:
    path = Path(path)
    raw = read_toml(path, "config file")
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict) and key in ("hyperparameters", "data", "run"):
            flat.update({f"hp_{k}" if key == "hyperparameters" else k: v for k, v in value.items()})
        else:
            flat[key] = value
    actions = _actions()
    out: dict[str, Any] = {}
    for key, value in flat.items():
        dest = key.replace("-", "_")
        if dest not in valid and f"hp_{dest}" in valid:
            dest = f"hp_{dest}"
        if dest not in valid or dest in ("config", "resume"):
            shown = key[3:] + " in [hyperparameters]" if key.startswith("hp_") else key
            raise UserError(f"unknown key {shown!r} in {path}")
        out[dest] = coerce(dest, value, actions.get(dest), str(path))
    return out


def read_saved(path: Path, known: set[str] = frozenset()) -> dict[str, Any]:
    """A run's saved options, checked key by key (:func:`pflt.commands._run_saved.read_saved`
    with this command line's options)."""
    return _run_saved.read_saved(path, known, _actions(), coerce)


def check_data_options(values: dict[str, Any]) -> None:
    """Data options the chosen ``--data``/``--partition`` would ignore are an error
    (:func:`pflt.commands._run_data.check_data_options` with these options' defaults)."""
    _run_data.check_data_options(values, {d: a.default for d, a in _actions().items()})


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """One options dict from defaults < config < explicit command line (< saved run)."""
    from algorithms.engine.base import get_algorithm, hyperparameters

    values = {k: v for k, v in vars(args).items()
              if k not in ("func", "command", "argv", "help")}
    explicit = _explicit(getattr(args, "argv", []))
    if values.get("config"):
        for k, v in load_config(values["config"], set(values)).items():
            if k not in explicit:
                values[k] = v
    if values.get("resume"):
        saved_path = Path(values["resume"]) / "run_options.json"
        if not saved_path.exists():
            raise FileNotFoundError(f"{values['resume']} has no run_options.json to resume")
        if values.get("overwrite"):
            raise UserError("--overwrite does not apply to --resume (it continues the run)")
        before = read_saved(saved_path, set(values))
        clash = sorted(k for k in explicit - RESUMABLE if values[k] != before.get(k))
        if clash:
            raise UserError(f"--resume: {', '.join(clash)} differ from the saved run "
                            f"({', '.join(f'{k}={before.get(k)!r}' for k in clash)})")
        for k, v in before.items():
            if k not in explicit or k not in RESUMABLE:
                values[k] = v
        values["out"] = values["resume"]
    cls = get_algorithm(values["algorithm"])
    own = {f.name for f in hyperparameters(cls)}
    given = {k[3:]: v for k, v in values.items() if k.startswith("hp_") and v is not None}
    foreign = sorted(set(given) - own)
    if foreign:
        raise UserError(f"option(s) {', '.join('--' + f.replace('_', '-') for f in foreign)} "
                        f"do not apply to {values['algorithm']}")
    from pflt.commands.run_checks import INT_MAX, check_options

    if values.get("rounds") is None:
        values["rounds"] = default_rounds(cls(**given))
    check_options(values)
    if not values.get("resume"):   # a saved run was checked when it started
        check_data_options(values)
    for k, v in given.items():
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT_MAX:
            raise UserError(f"--{k.replace('_', '-')} {v} is too large (at most {INT_MAX})")
        if k.endswith(STEP_SUFFIXES) and k not in BUDGETS and isinstance(v, int) \
                and v > MAX_STEPS:
            raise UserError(f"--{k.replace('_', '-')} {v} is more than {MAX_STEPS:,} (sequential "
                            f"steps or layers per round: {v:.3g} would take days)")
    values["hyperparameters"] = given
    if values.get("model") is None:
        values["model"] = getattr(cls, "default_model", "mlr")
        values["model_chosen"] = values["model"] != "mlr"
    if values["model"] == "mlp-bn" and not getattr(cls, "batchnorm_statistics", False):
        from algorithms.engine.base import registry
        able = [n for n, c in registry().items() if getattr(c, "batchnorm_statistics", False)]
        raise UserError(f"--model mlp-bn: {values['algorithm']} does not update BatchNorm "
                        f"running statistics; algorithms that do: {', '.join(able)}")
    if values["model"] == "mlp-bn" and values.get("l2"):
        raise UserError("--l2 does not apply to --model mlp-bn")
    hidden = values.get("hidden")
    if hidden is not None and values["model"] == "mlr":
        raise UserError("--hidden does not apply to --model mlr (no hidden layer)")
    if isinstance(hidden, (tuple, list)) and values["model"] in ("dnn", "cnn", "resnet18-gn"):
        raise UserError(f"--model {values['model']} takes one --hidden width, got "
                        f"{','.join(map(str, hidden))}")
    if isinstance(hidden, (tuple, list)) and values["model"] == "cnn3" and len(hidden) != 2:
        raise UserError(f"--model cnn3 takes two --hidden widths (its hidden dense layers), "
                        f"got {','.join(map(str, hidden))}")
    if values["model"] == "resnet18-gn" and hidden is not None and hidden % 2:
        raise UserError(f"--model resnet18-gn: --hidden (the base width) must be even (2 "
                        f"GroupNorm groups), got {hidden}")
    cls(**given)  # validate hyper-parameters before any data is generated
    return values


#: integer hyper-parameters that count sequential work per round (local steps, layers,
#: restarts, mixture components, cross-validation folds, grid points): the papers use at most a
#: few hundred;
#: beyond MAX_STEPS a round takes days
STEP_SUFFIXES = ("_steps", "_rounds", "_layers", "_restarts", "_components", "folds", "_grid")
MAX_STEPS = 100_000
BUDGETS = ("total_rounds",)     # a schedule over all rounds, not work per round

def default_rounds(algorithm) -> int:
    """``--rounds`` when none is given: the algorithm's own schedule length
    (``schedule_rounds()``, e.g. PPFE's ``total_rounds``) where it has one, else
    :data:`DEFAULT_ROUNDS`."""
    own = getattr(algorithm, "schedule_rounds", None)
    return int(own()) if callable(own) else DEFAULT_ROUNDS


def inert_notes(algorithm, model) -> list[str]:
    """One note per hyper-parameter that cannot change this run's result with this model
    (the algorithm's ``inert_hyperparameters(model)``: FedProto's and FedPAC's λ, pFedFDA's
    η with ``--model mlr``), naming its option, its value and why."""
    inert = getattr(algorithm, "inert_hyperparameters", None)
    if not callable(inert):
        return []
    name = getattr(algorithm, "name", type(algorithm).__name__)
    return [f"{name}: --{hp.replace('_', '-')} {getattr(algorithm, hp)!r} cannot change the "
            f"result ({why})" for hp, why in inert(model).items()]


def test_split_reason(algorithm) -> str | None:
    """Why the algorithm, as configured, reads its clients' test split (its
    ``reads_test_split()``: Per-FedAvg's non-default ``adapt_on='test'``), else ``None``.
    Such a run's accuracies are not held-out accuracies; ``engine.train_test_isolation``
    flags the same configurations."""
    reads = getattr(algorithm, "reads_test_split", None)
    return reads() if callable(reads) else None


def schedule_note(algorithm, model, rounds: int) -> str | None:
    """A warning when ``rounds`` ends before the algorithm's own schedule: how many of its
    stages start and finish (``schedule(model)``: rounds per stage) — else ``None``."""
    own = getattr(algorithm, "schedule_rounds", None)
    if not callable(own) or rounds >= own():
        return None
    name = getattr(algorithm, "name", type(algorithm).__name__)
    note = f"{name}: --rounds {rounds} ends before its schedule of {own()} rounds"
    if callable(getattr(algorithm, "schedule", None)):
        per = list(algorithm.schedule(model))
        starts = [sum(per[:s]) for s in range(len(per))]
        started = sum(1 for st in starts if st < rounds)
        done = sum(1 for st, r in zip(starts, per) if st + r <= rounds)
        note += (f": {done} of its {len(per)} stages finish, {started} start (stages start "
                 f"at rounds {', '.join(map(str, starts))})")
    return note + f"; pass --rounds {own()} (or a smaller budget) to run them all"
