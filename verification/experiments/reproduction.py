"""Reproductions of the papers' real-data tables: what a table is, and its cells.

A :class:`Reproduction` is a table of the paper: rows (methods, each an algorithm with its
hyper-parameters and the evaluated model whose accuracy the paper reports) × columns (a
dataset, partition and model) × seeds.  Each *cell* (row, column, seed) is one
``pflt run`` command line with its own run directory; its value is read back from that
run's ``summary.json`` (last round) and ``history.csv`` (best evaluated round).  The
registry of the papers' tables is :mod:`verification.experiments.reproductions`; running
cells and writing the CSV/markdown is :mod:`verification.experiments.reproduction_run`.

The command line is the record: re-running a CSV row's ``command`` writes the run directory
whose ``summary.json`` holds the row's value (``--seed`` the training seed, ``--data-seed 0``
the partition, kept fixed across seeds as in the papers).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Row:
    """A method of the table: ``label`` as the paper prints it, the registered ``algorithm``,
    its hyper-parameters ``hp`` (``--name value`` options of ``pflt run``) and ``evaluated``,
    the model whose accuracy is the table's number (``global``, ``personalized``, ``cluster``)."""

    label: str
    algorithm: str
    hp: dict = field(default_factory=dict)
    evaluated: str = "personalized"
    #: only these columns (``None``: every column), e.g. a λ the paper ran on one column only
    columns: tuple | None = None
    #: per-column hyper-parameters ``{column key: {name: value}}`` (pFedMe's λ per model)
    column_hp: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """A column of the table: ``key`` (the paper's column), dataset ``data`` (a ``--data``
    name), ``model`` and the options of the partition (``--partition``, ``--clients`` …), plus
    ``hp`` overriding the rows' hyper-parameters for this column (e.g. CIFAR's lr)."""

    key: str
    data: str
    model: str
    options: dict = field(default_factory=dict)
    hp: dict = field(default_factory=dict)
    rounds: int | None = None


@dataclass(frozen=True)
class Reproduction:
    """A paper's table: its rows, columns, the paper's numbers ``paper[(row, column)]`` (%),
    default ``rounds`` T, evaluation period and the ``notes`` the markdown prints."""

    name: str
    paper: str
    table: str
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    numbers: dict
    rounds: int
    eval_every: int = 5
    seeds: tuple[int, ...] = (0, 1, 2)
    notes: str = ""
    #: the paper's ordering claims ``(column, better, worse)`` judged by the report and checks
    claims: tuple = ()
    #: summary key suffix of the table's number: ``accuracy`` (sample-weighted, what the
    #: papers' code computes) or ``accuracy_mean`` (mean over clients: PLGU's "average")
    metric: str = "accuracy"
    #: seconds per round of each (algorithm, model) measured on the shared 2-core machine
    #: (for the cost printed before a run); missing pairs use ``default_round_seconds``
    round_seconds: dict = field(default_factory=dict)
    default_round_seconds: float = 2.0

    def datasets(self) -> list[str]:
        return sorted({c.data for c in self.columns})


@dataclass(frozen=True)
class Cell:
    """One run: ``row`` × ``column`` × training ``seed`` for ``rounds`` rounds."""

    reproduction: str
    row: Row
    column: Column
    seed: int
    rounds: int
    eval_every: int
    #: ``pflt run`` options replacing the entry's (``pflt reproduce --option KEY=VALUE``)
    overrides: tuple = ()
    metric_suffix: str = "accuracy"

    @property
    def metric(self) -> str:
        """The ``summary.json`` key of the cell's number."""
        return f"{self.row.evaluated}_{self.metric_suffix}"

    @property
    def run_name(self) -> str:
        slug = "".join(ch if ch.isalnum() else "-" for ch in self.row.label.lower()).strip("-")
        while "--" in slug:
            slug = slug.replace("--", "-")
        return f"{slug}.{self.column.key}.s{self.seed}"

    def argv(self, data_dir: str | None, out: str) -> list[str]:
        """The ``pflt run`` options of this cell (without ``pflt run``)."""
        data = f"{self.column.data}:{data_dir}" if data_dir else self.column.data
        argv = ["--algorithm", self.row.algorithm, "--data", data, "--model", self.column.model]
        over = dict(self.overrides)
        per = self.row.column_hp.get(self.column.key, {})
        for k, v in {**self.column.options, **self.row.hp, **self.column.hp, **per,
                     **over}.items():
            argv += _option(k, v)
        argv += ["--rounds", str(self.rounds), "--eval-every", str(self.eval_every),
                 "--seed", str(self.seed), "--data-seed", "0", "--out", out,
                 "--overwrite", "--no-progress"]
        return argv

    def command(self, data_dir: str | None, out: str) -> str:
        return "pflt run " + shlex.join(self.argv(data_dir, out))

    @property
    def options_text(self) -> str:
        """The ``--option`` replacements of this cell as ``key=value, …`` (``""``: the
        entry's setting): the CSV's ``options`` column, which the markdown groups by."""
        return ", ".join(f"{k}={' '.join(map(str, v)) if isinstance(v, (tuple, list)) else v}"
                         for k, v in self.overrides)


def _option(key: str, value) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if isinstance(value, (tuple, list)):
        return [flag, *map(str, value)]
    return [flag, str(value)]


def cells(rep: Reproduction, seeds=None, rounds: int | None = None, columns=None,
          methods=None, overrides=None) -> list[Cell]:
    """The cells of ``rep``: every column and row, or those whose key / label is in
    ``columns`` / ``methods``.  ``overrides`` (``pflt run`` options) replace a cell's option
    where the cell has it or its algorithm accepts it (a hyper-parameter left at its default,
    e.g. pFedMe's ``personal_lr``); an option that no row has as a hyper-parameter (a data
    option, e.g. ``clients``) is added to every cell."""
    seeds = rep.seeds if seeds is None else tuple(seeds)
    hp_keys = {k for r in rep.rows for d in (r.hp, *r.column_hp.values()) for k in d}
    hp_keys |= {k for c in rep.columns for k in c.hp}
    out = []
    for col in rep.columns:
        if columns and col.key not in columns:
            continue
        t = rounds or col.rounds or rep.rounds
        for row in rep.rows:
            if (methods and row.label not in methods) or (
                    row.columns is not None and col.key not in row.columns):
                continue
            has = {**col.options, **row.hp, **col.hp, **row.column_hp.get(col.key, {})}
            accepts = _accepted(row.algorithm)
            over = tuple(sorted((k, v) for k, v in (overrides or {}).items()
                                if k in has or k in accepts or k not in hp_keys))
            for s in seeds:
                out.append(Cell(rep.name, row, col, int(s), int(t),
                                min(rep.eval_every, int(t)), over, rep.metric))
    return out


def _accepted(algorithm: str) -> set[str]:
    """The hyper-parameter names ``algorithm`` accepts (an ``--option`` of one of them applies
    to its cells even where the row leaves it at its default)."""
    from algorithms.engine.base import hyperparameters, registry
    cls = registry().get(algorithm)
    return {f.name for f in hyperparameters(cls)} if cls is not None else set()


def cost_seconds(rep: Reproduction, cell_list) -> float:
    """Estimated single-process seconds of ``cell_list`` from :attr:`Reproduction.round_seconds`
    (plus 12 s start-up per run: loading and validating the data)."""
    total = 0.0
    for c in cell_list:
        per = rep.round_seconds.get((c.row.algorithm, c.column.model), rep.default_round_seconds)
        total += 12.0 + per * c.rounds
    return total


#: ``pflt run`` options that a cell sets itself or that define its row or column: never an
#: ``--option`` (a replacement would run another method under the row's label, or be
#: silently overridden by the cell's own value)
FIXED_OPTIONS = {
    "algorithm": "the row's algorithm (choose rows with --methods)",
    "variant": "the row's variant (its label names it)",
    "data": "the column's dataset (give its files with --data-dir)",
    "model": "the column's model (choose columns with --columns)",
    "seed": "the cell's training seed (use --seeds)",
    "data_seed": "the partition's seed (fixed at 0, as in the papers)",
    "rounds": "the cell's rounds (use --rounds)",
    "eval_every": "the entry's evaluation period",
    "out": "the cell's run directory (use --runs-dir)",
    "overwrite": "set by every cell",
    "no_progress": "set by every cell",
    "resume": "a cell always runs from round 0",
    "config": "a file could replace any option of the cell",
    "plugin": "load plugins with pflt --plugin before the command",
    "help": "not a run option",
}


def distinguishing_options(rep: Reproduction) -> set[str]:
    """Hyper-parameters whose value tells two rows of one algorithm apart on a column
    (CGPFL's K in Fig. 2, λ in Table 2, lr in the lr grid): replacing one would run the same
    method under several labels."""
    keys = set()
    for col in rep.columns:
        values: dict = {}
        for row in rep.rows:
            if row.columns is not None and col.key not in row.columns:
                continue
            for k, v in {**row.hp, **col.hp, **row.column_hp.get(col.key, {})}.items():
                values.setdefault((row.algorithm, k), set()).add(repr(v))
        keys |= {k for (_, k), vs in values.items() if len(vs) > 1}
    return keys


def check_overrides(rep: Reproduction, overrides: dict) -> None:
    """``ValueError`` (one line) for an ``--option`` that a cell sets itself, that defines a
    row or column (:data:`FIXED_OPTIONS`) or tells the rows apart
    (:func:`distinguishing_options`)."""
    rows_apart = distinguishing_options(rep)
    for key in overrides:
        if key in FIXED_OPTIONS:
            raise ValueError(f"--option {key}=…: {FIXED_OPTIONS[key]}; it cannot be replaced")
        if key in rows_apart:
            raise ValueError(f"--option {key}=…: {key} tells the rows of {rep.name} apart "
                             "(their labels fix it); it cannot be replaced for every row")


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def resolve_methods(rep: Reproduction, names) -> list[str]:
    """The row labels ``names`` mean: a label as the paper prints it, the same ignoring case,
    spaces and punctuation (``pfedme-pm``), or a registered algorithm name (``pfedme``,
    ``cgpfl-heur``).  ``ValueError`` (one line) for a name that matches no row, or several
    (listing them)."""
    labels = [r.label for r in rep.rows]
    out: list[str] = []
    for name in names:
        hits = [name] if name in labels else (
            [r.label for r in rep.rows if _norm(r.label) == _norm(name)]
            or [r.label for r in rep.rows if _norm(r.algorithm) == _norm(name)])
        if not hits:
            algs = sorted({r.algorithm for r in rep.rows})
            raise ValueError(f"unknown method {name!r}; {rep.name} has {labels} (or by "
                             f"algorithm: {', '.join(algs)})")
        if len(hits) > 1:
            raise ValueError(f"--methods {name!r} is ambiguous in {rep.name}: it names "
                             f"{hits}; give one of these labels")
        out += [h for h in hits if h not in out]
    return out
