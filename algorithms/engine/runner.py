"""The one runner: ``run(algorithm, federation, model, rounds=…)`` → :class:`RunResult`.

Shows a progress bar, evaluates every ``eval_every`` rounds (and after the last), records
per evaluated model (``personalized``, ``global``, ``local``, … as the algorithm names
them): ``<name>_accuracy`` (sample-weighted, = total correct / total samples),
``<name>_accuracy_mean`` / ``_low5`` / ``_top5`` (see :mod:`algorithms.engine.evaluation`),
``<name>_loss`` (test, weighted), ``<name>_train_loss``, the per-client accuracy vector
``<name>_client_accuracy``, algorithm diagnostics, and wall time.  In ``out_dir``:
``history.jsonl`` (one line per evaluation, everything) and ``history.csv`` (scalars) get
one line appended per evaluation (the cost of an evaluation's save does not grow with the
number of evaluations); ``history.json`` (the configuration, the round-0 evaluation
``initial_evaluation`` and all entries) is written in full before the first round (so a
run killed early keeps its configuration), at every checkpoint, at a divergence stop and
after the last round.  :func:`read_history` reads a run directory, a killed one included
(its entries from ``history.jsonl``).

Divergence contract: a run stops with :class:`DivergenceError` naming the round and the
model when the state becomes non-finite, an internal NaN guard fires in a round
(:class:`~pfl_theory.validation.NonFiniteValueError`: k-means, proximal solvers, scores),
or an evaluated loss is non-finite or exceeds ``EXPLOSION_FACTOR`` (1e3) × max(that
model's round-0 test loss, 1) (:func:`divergence`); the history so far (including the
offending evaluation) is kept and saved.  ``pflt run`` exits 1.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

from algorithms.engine.base import State
from pfl_theory.safe_files import append_text, atomic_open, atomic_write_text
from algorithms.engine.checkpoint import save_checkpoint
from algorithms.engine.contract import client_chunks
from algorithms.engine.evaluation import evaluate_models, evaluated_models, model_for, summarize
# read_history and HISTORY_LINES live with the other readers of a run directory (no torch:
# pflt compare reads histories without importing the engine); named here as before
from algorithms.engine.run_files import HISTORY_LINES, read_history  # noqa: F401
from pfl_theory.threads import api_threads, torch_threads
from pfl_theory.validation import NonFiniteValueError


#: a loss above EXPLOSION_FACTOR × max(initial loss, 1) counts as divergence (see
#: :func:`divergence`).  Cross-entropy of a trained classifier stays within a small multiple
#: of its initial value log C (a confidently wrong model on every sample: tens); a diverging
#: step reaches 1e5 … 1e35 within a few rounds.
EXPLOSION_FACTOR = 1e3


class DivergenceError(RuntimeError):
    """The run diverged (non-finite state, non-finite or exploded loss, or an internal NaN
    guard fired); ``round`` is the first bad round, ``model`` the model named, ``history``
    what was kept (saved to ``out_dir``)."""

    def __init__(self, round_: int, history: "History", *, model: str | None = None,
                 reason: str | None = None):
        where = f" of model {model!r}" if model else ""
        reason = reason or f"non-finite parameters{where} after round {round_}"
        super().__init__(f"{reason}: the run diverged (try a smaller learning rate); "
                         "results so far are kept")
        self.round = round_
        self.model = model
        self.history = history


NonFiniteError = DivergenceError  # the former name


def divergence(entry: dict[str, Any], initial: dict[str, Any] | None
               ) -> tuple[str, str] | None:
    """The divergence contract at an evaluation: a reason if some evaluated model's test or
    train loss is NaN/inf or exceeds ``EXPLOSION_FACTOR × max(L0, 1)`` with ``L0`` that
    model's test loss at round 0 (``initial``: :attr:`History.initial`, saved as
    ``initial_evaluation`` in ``history.json``), as ``(reason, model)``, else ``None``."""
    for key, value in entry.items():
        if not (key.endswith("_loss") and isinstance(value, float)):
            continue
        name = key[:-len("_train_loss")] if key.endswith("_train_loss") else key[:-len("_loss")]
        if not math.isfinite(value):
            return f"{key} of model {name!r} is {value} after round {entry['round']}", name
        ref = (initial or {}).get(f"{name}_loss")
        if ref is not None and math.isfinite(ref) and value > EXPLOSION_FACTOR * max(ref, 1.0):
            return (f"{key} of model {name!r} is {value:.3g} after round {entry['round']}, "
                    f"more than {EXPLOSION_FACTOR:g} × max(initial loss {ref:.3g}, 1)"), name
    return None


def all_finite(v: torch.Tensor) -> bool:
    """``torch.isfinite(v).all()`` without its boolean temporary: every entry is finite iff
    the smallest and the largest are (``torch.aminmax`` propagates NaN, as its
    documentation states; tested for NaN, +inf and −inf at every position).  For pFedMe's
    state at N = 100,000 (3 models of 61 M floats) 18 ms a model instead of 0.26 s."""
    if v.numel() == 0:
        return True
    lo, hi = torch.aminmax(v)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def non_finite_model(state: State) -> str | None:
    """The name of the first model (or tensor) of ``state`` holding NaN/inf, else ``None``."""
    for name, params in state.models.items():
        if not all(all_finite(v) for v in params.values()):
            return name
    for name, v in state.tensors.items():
        if v.is_floating_point() and not all_finite(v):
            return name
    return None


def initial_evaluation(algorithm, state: State, federation, model) -> dict[str, float]:
    """Test accuracy and loss of every evaluated model at the initial state (round 0): the
    reference of :func:`divergence`."""
    out: dict[str, float] = {}
    w = federation.test.counts.double()
    for name, (acc, loss) in evaluate_models(model_for(algorithm, model),
                                             evaluated_models(algorithm, state),
                                             federation.test).items():
        out[f"{name}_accuracy"] = summarize(acc, federation.test.counts)["weighted"]
        out[f"{name}_loss"] = float((loss * w).sum() / w.sum())
    return out


def _play_round(algorithm, state: State, federation, model, history: "History",
                out_dir) -> State:
    """One round under the divergence contract (:func:`guarded_round`; history saved
    before the :class:`DivergenceError`)."""
    return guarded_round(lambda: algorithm.round(state, federation, model), state,
                         federation.dtype,
                         lambda round_, name, reason: _stop(history, out_dir, round_, name,
                                                            reason))


def guarded_round(step: Callable[[], State], before: State, dtype,
                  stop: Callable[[int, "str | None", "str | None"], Any]) -> State:
    """``step()`` (one round from ``before``) under the divergence contract: an internal NaN
    guard (:class:`~pfl_theory.validation.NonFiniteValueError`), an overflow of ``dtype``
    or a non-finite state afterwards calls ``stop(round, model, reason)``, which raises
    (:class:`DivergenceError`, after saving what the caller keeps).  The one
    implementation of the per-round contract: the runner and the Flower server
    (:mod:`algorithms.flower.strategy`) both use it."""
    try:
        new = step()
    except NonFiniteValueError as exc:
        stop(before.round + 1, non_finite_model(before),
             f"round {before.round + 1} produced non-finite values inside the algorithm ({exc})")
        raise                             # stop raises; never reached
    except RuntimeError as exc:  # a product of hyper-parameters beyond the dtype's range
        if "without overflow" not in str(exc):
            raise
        stop(before.round + 1, None, f"round {before.round + 1} overflowed {dtype} ({exc})")
        raise
    bad = non_finite_model(new)
    if bad is not None:
        stop(new.round, bad, None)
    return new


def evaluation_divergence(entry: dict[str, Any], history: "History",
                          stop: Callable[[int, "str | None", "str | None"], Any]) -> None:
    """The divergence contract at an evaluation ``entry`` (already appended to
    ``history``): ``stop(round, model, reason)`` when :func:`divergence` finds a
    non-finite or exploded loss against ``history.initial``."""
    diverged = divergence(entry, history.initial)
    if diverged is not None:
        stop(entry["round"], diverged[1], diverged[0])


def check_hyperparameter_range(algorithm, dtype) -> None:
    """Every float hyper-parameter fits ``dtype`` (1e300 passes the finiteness checks but
    is beyond float32's 3.4e38: torch refuses to multiply by it), else a one-line
    ``ValueError`` naming it."""
    big = torch.finfo(dtype).max
    for f in dataclasses.fields(algorithm):
        value = getattr(algorithm, f.name)
        if isinstance(value, float) and math.isfinite(value) and abs(value) > big:
            raise ValueError(f"{f.name}={value!r} is beyond the range of {dtype} (|x| <= "
                             f"{big:.3g}): use a smaller value (or --dtype float64)")


def _stop(history: "History", out_dir, round_: int, model: str | None, reason: str | None):
    if out_dir is not None:
        history.save(out_dir)
    raise DivergenceError(round_, history, model=model, reason=reason)


@dataclass
class History:
    config: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)
    #: test accuracy/loss of the evaluated models at round 0 (the divergence reference)
    initial: dict[str, float] = field(default_factory=dict)
    #: entries in the history.json last written (None: not written by this object)
    _json_entries: int | None = field(default=None, init=False, repr=False, compare=False)

    @staticmethod
    def load(out_dir: str | Path) -> "History":
        data = read_history(out_dir)
        return History(data["config"], data["entries"], data.get("initial_evaluation", {}))

    def last(self) -> dict[str, Any]:
        return self.entries[-1] if self.entries else {}

    def series(self, key: str) -> list[Any]:
        return [e[key] for e in self.entries if key in e]

    def save(self, out_dir: str | Path) -> None:
        """Write ``history.jsonl``, ``history.csv`` and ``history.json`` in full, each
        atomically (temp file + rename; ``history.json`` last, so it never holds entries
        that ``history.jsonl`` lacks)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / HISTORY_LINES, "".join(_line(e) for e in self.entries))
        with atomic_open(out / "history.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self._scalars(), extrasaction="ignore")
            writer.writeheader()
            writer.writerows(self.entries)
        self._write_json(out)

    def save_json(self, out_dir: str | Path) -> None:
        """Write ``history.json`` (configuration, initial evaluation, every entry) atomically;
        nothing when the last one this object wrote (to ``out_dir``, within a run) has the
        same entries."""
        if self._json_entries != len(self.entries):
            self._write_json(out_dir)

    def _write_json(self, out_dir: str | Path) -> None:
        _atomic_write(Path(out_dir) / "history.json",
                      json.dumps({"config": self.config, "entries": self.entries,
                                  "initial_evaluation": self.initial}, indent=1))
        self._json_entries = len(self.entries)

    def save_last(self, out_dir: str | Path) -> None:
        """Append the last entry to ``history.jsonl`` and ``history.csv`` (files written by
        :meth:`save` with the entries before it): the cost of one entry, however many came
        before."""
        out = Path(out_dir)
        if len(self.entries) == 1:          # the csv header comes from the first entry
            self.save(out)
            return
        append_text(out / HISTORY_LINES, _line(self.entries[-1]))
        row = io.StringIO(newline="")
        csv.DictWriter(row, fieldnames=self._scalars(),
                       extrasaction="ignore").writerow(self.entries[-1])
        append_text(out / "history.csv", row.getvalue())

    def _scalars(self) -> list[str]:
        first = self.entries[0] if self.entries else {}
        return [k for k, v in first.items() if not isinstance(v, (list, dict))]


#: a run expected to take longer than this (after its first round) prints its estimate
ESTIMATE_ABOVE_SECONDS = 120.0


def estimate_line(seconds: float, rounds_left: int) -> str | None:
    """The estimate :func:`run` prints after its first round: that round's seconds (with its
    evaluation) and the expected time of the ``rounds_left`` others, or ``None`` when those
    take at most :data:`ESTIMATE_ABOVE_SECONDS`."""
    left = seconds * rounds_left
    if left <= ESTIMATE_ABOVE_SECONDS:
        return None
    span = f"{left / 3600:.1f} h" if left >= 3600 else f"{left / 60:.0f} min"
    return (f"estimated time: {seconds:.1f} s per round (the first, with its evaluation), "
            f"about {span} for the {rounds_left} rounds left")


def print_estimate(seconds: float, rounds_left: int, bar) -> None:
    line = estimate_line(seconds, rounds_left)
    if line is not None:
        bar.write(line, file=sys.stderr)


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry) + "\n"


@dataclass
class RunResult:
    history: History
    state: State


def _atomic_write(path: Path, text: str) -> None:
    atomic_write_text(path, text)     # temp + rename, never through a link


def evaluation_entry(algorithm, state: State, federation, model, *, train_loss: bool = True
                     ) -> dict[str, Any]:
    """Metrics of every model the algorithm evaluates, at ``state``: one fused pass over
    the test split and (``train_loss``) one over the train split for all models together
    (:func:`algorithms.engine.evaluation.evaluate_models`; the loss only there: the train accuracy
    is not recorded)."""
    entry: dict[str, Any] = {"round": state.round}
    models = evaluated_models(algorithm, state)
    model = model_for(algorithm, model)
    test = evaluate_models(model, models, federation.test)
    train = evaluate_models(model, models, federation.train, accuracy=False) if train_loss else {}
    w = federation.test.counts.double()
    wt = federation.train.counts.double()
    for name in models:
        acc, loss = test[name]
        s = summarize(acc, federation.test.counts)
        entry[f"{name}_accuracy"] = s["weighted"]
        entry[f"{name}_accuracy_mean"] = s["mean"]
        entry[f"{name}_accuracy_low5"] = s["low5"]
        entry[f"{name}_accuracy_top5"] = s["top5"]
        entry[f"{name}_loss"] = float((loss * w).sum() / w.sum())
        if train_loss:
            entry[f"{name}_train_loss"] = float((train[name][1] * wt).sum() / wt.sum())
        entry[f"{name}_client_accuracy"] = acc.cpu().double().numpy().round(6).tolist()
    if hasattr(algorithm, "diagnostics"):
        entry.update(algorithm.diagnostics(state, federation, model))
    return entry


def run_config(algorithm, federation, model, *, rounds: int, seed: int, eval_every: int,
               config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration a run records (``history.json``'s ``config``, the checkpoint's)."""
    return {"algorithm": getattr(algorithm, "name", type(algorithm).__name__),
            "hyperparameters": dataclasses.asdict(algorithm), "federation": federation.name,
            "num_clients": federation.num_clients, "model": type(model).__name__,
            "rounds": rounds, "seed": seed, "eval_every": eval_every,
            "device": str(federation.device), "dtype": str(federation.dtype), **(config or {})}


def run(algorithm, federation, model, *, rounds: int, seed: int = 0, eval_every: int = 1,
        out_dir: str | Path | None = None, progress: bool = True, state: State | None = None,
        history: History | None = None, train_loss: bool = True,
        config: dict[str, Any] | None = None, checkpoint_every: int | None = None,
        on_round: Callable[[State], None] | None = None, overwrite: bool = False,
        threads: int | None = None, client_chunk: int | None = None,
        estimate: bool | None = None) -> RunResult:
    """Run until round ``rounds`` (continuing from ``state``/``history`` when given).

    Threads: the rounds run at ``threads`` torch threads if given, else ``PFLT_THREADS``,
    else **one** — the same policy as ``pflt run`` (:func:`pfl_theory.threads.api_threads`;
    the engine's small batched kernels were 4–9× slower at torch's default of two threads
    on a shared 2-core machine, measured in :mod:`pfl_theory.threads`); torch's previous
    setting is restored when the run returns.  Pass ``threads=torch.get_num_threads()`` to
    keep your own setting.

    ``client_chunk=k`` trains a round's clients ``k`` at a time (peak memory of training
    grows with ``k``, not with N; the same numbers: :func:`algorithms.engine.contract.client_chunks`;
    :func:`algorithms.engine.chunks.chunk_for_budget` sizes it from a memory budget).

    ``estimate`` (default: ``progress``): after the first round of this call, print on
    stderr the seconds it took (with its evaluation) and the time the remaining rounds are
    expected to take, when that is more than :data:`ESTIMATE_ABOVE_SECONDS`.

    ``checkpoint_every=k`` writes ``out_dir/checkpoint.pt`` atomically every ``k`` rounds
    and after the last (:mod:`algorithms.engine.checkpoint`); ``on_round(state)`` is called after
    each round (and its checkpoint).  A run started afresh (no ``state``) in an ``out_dir``
    holding another run's files is refused (:class:`~algorithms.engine.run_dir.RunDirectoryError`)
    unless ``overwrite=True``, which first removes them
    (:func:`algorithms.engine.run_dir.claim_out_dir`); to continue a run use
    :func:`algorithms.engine.resume.resume_point`."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    with torch_threads(api_threads(threads)), client_chunks(client_chunk):
        return _run(algorithm, federation, model, rounds=rounds, seed=seed,
                    eval_every=eval_every, out_dir=out_dir, progress=progress, state=state,
                    history=history, train_loss=train_loss, config=config,
                    checkpoint_every=checkpoint_every, on_round=on_round, overwrite=overwrite,
                    estimate=progress if estimate is None else estimate)


def _run(algorithm, federation, model, *, rounds: int, seed: int, eval_every: int,
         out_dir, progress: bool, state: State | None, history: History | None,
         train_loss: bool, config: dict[str, Any] | None, checkpoint_every: int | None,
         on_round: Callable[[State], None] | None, overwrite: bool,
         estimate: bool = False) -> RunResult:
    cfg = run_config(algorithm, federation, model, rounds=rounds, seed=seed,
                     eval_every=eval_every, config=config)
    if checkpoint_every is not None and (checkpoint_every < 1 or out_dir is None):
        raise ValueError("checkpoint_every needs a value >= 1 and an out_dir")
    check_hyperparameter_range(algorithm, federation.dtype)
    if state is None and out_dir is not None:
        from algorithms.engine.run_dir import claim_out_dir
        claim_out_dir(out_dir, cfg, overwrite=overwrite)
    history = History(cfg) if history is None else history
    if state is None:
        state = algorithm.init(federation, model, seed)
        history.initial = initial_evaluation(algorithm, state, federation, model)
    if out_dir is not None:  # a run killed before its first evaluation keeps its config; a
        history.save(out_dir)  # resumed one's files start from the entries it continues
    start_wall = time.perf_counter()
    bar = tqdm(range(state.round, rounds), desc=cfg["algorithm"], unit="round",
               disable=not progress, dynamic_ncols=True)
    start_round = state.round
    try:
        for _ in bar:
            round_start = time.perf_counter()
            state = _play_round(algorithm, state, federation, model, history, out_dir)
            if state.round % eval_every == 0 or state.round == rounds:
                entry = evaluation_entry(algorithm, state, federation, model, train_loss=train_loss)
                entry["wall_seconds"] = round(time.perf_counter() - start_wall, 4)
                history.entries.append(entry)
                evaluation_divergence(
                    entry, history,
                    lambda round_, name, reason: _stop(history, out_dir, round_, name, reason))
                first = next((k for k, v in entry.items()
                              if k.endswith("_accuracy") and isinstance(v, float)), None)
                if first:
                    bar.set_postfix({first: f"{entry[first]:.4f}"})
                if out_dir is not None:
                    history.save_last(out_dir)
            if estimate and state.round == start_round + 1:
                print_estimate(time.perf_counter() - round_start, rounds - state.round, bar)
            if checkpoint_every and (state.round % checkpoint_every == 0 or state.round == rounds):
                save_checkpoint(Path(out_dir) / "checkpoint.pt", state, algorithm, cfg)
                history.save_json(out_dir)
            if on_round is not None:
                on_round(state)
    except KeyboardInterrupt:  # Ctrl-C (pflt run exits 130): every file complete; a hard
        if out_dir is not None:  # kill leaves history.jsonl, which read_history reads
            history.save(out_dir)
        raise
    if out_dir is not None:
        history.save_json(out_dir)
    return RunResult(history, state)
