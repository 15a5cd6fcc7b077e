"""The one runner: ``run(algorithm, federation, model, rounds=…)`` → :class:`RunResult`.

Shows a progress bar, evaluates every ``eval_every`` rounds (and after the last), records
per evaluated model (``personalized``, ``global``, ``local``, … as the algorithm names
them): ``<name>_accuracy`` (sample-weighted, = total correct / total samples),
``<name>_accuracy_mean`` / ``_low5`` / ``_top5`` (see :mod:`algorithms.evaluation`),
``<name>_loss`` (test, weighted), ``<name>_train_loss``, the per-client accuracy vector
``<name>_client_accuracy``, algorithm diagnostics, and wall time.  Writes
``history.json`` (everything, plus the configuration) and ``history.csv`` (scalars) to
``out_dir`` after every evaluation.  A non-finite state stops the run with
:class:`NonFiniteError` naming the round; the history so far is kept and saved.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from algorithms.base import State
from algorithms.checkpoint import save_checkpoint
from algorithms.evaluation import evaluate_models, summarize


class NonFiniteError(RuntimeError):
    """The run produced NaN/inf; ``round`` is the first bad round, ``history`` what was kept."""

    def __init__(self, round_: int, history: "History"):
        super().__init__(f"non-finite parameters after round {round_}: the run diverged "
                         "(try a smaller learning rate); results so far are kept")
        self.round = round_
        self.history = history


@dataclass
class History:
    config: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def load(out_dir: str | Path) -> "History":
        data = json.loads((Path(out_dir) / "history.json").read_text())
        return History(data["config"], data["entries"])

    def last(self) -> dict[str, Any]:
        return self.entries[-1] if self.entries else {}

    def series(self, key: str) -> list[Any]:
        return [e[key] for e in self.entries if key in e]

    def save(self, out_dir: str | Path) -> None:
        """Write ``history.json`` and ``history.csv`` atomically (temp file + rename)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / "history.json",
                      json.dumps({"config": self.config, "entries": self.entries}, indent=1))
        scalars = [k for k in (self.entries[0] if self.entries else {})
                   if not isinstance(self.entries[0][k], (list, dict))]
        tmp = out / "history.csv.tmp"
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=scalars, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(self.entries)
        os.replace(tmp, out / "history.csv")


@dataclass
class RunResult:
    history: History
    state: State


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def evaluation_entry(algorithm, state: State, federation, model, *, train_loss: bool = True
                     ) -> dict[str, Any]:
    """Metrics of every model the algorithm evaluates, at ``state``: one fused pass over
    the test split and (``train_loss``) one over the train split for all models together
    (:func:`algorithms.evaluation.evaluate_models`)."""
    entry: dict[str, Any] = {"round": state.round}
    models = algorithm.evaluated(state)
    test = evaluate_models(model, models, federation.test)
    train = evaluate_models(model, models, federation.train) if train_loss else {}
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


def run(algorithm, federation, model, *, rounds: int, seed: int = 0, eval_every: int = 1,
        out_dir: str | Path | None = None, progress: bool = True, state: State | None = None,
        history: History | None = None, train_loss: bool = True,
        config: dict[str, Any] | None = None, checkpoint_every: int | None = None,
        on_round: Callable[[State], None] | None = None) -> RunResult:
    """Run until round ``rounds`` (continuing from ``state``/``history`` when given).

    ``checkpoint_every=k`` writes ``out_dir/checkpoint.pt`` atomically every ``k`` rounds
    and after the last (:mod:`algorithms.checkpoint`); ``on_round(state)`` is called after
    each round (and its checkpoint)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    cfg = {"algorithm": getattr(algorithm, "name", type(algorithm).__name__),
           "hyperparameters": dataclasses.asdict(algorithm), "federation": federation.name,
           "num_clients": federation.num_clients, "model": type(model).__name__,
           "rounds": rounds, "seed": seed, "eval_every": eval_every,
           "device": str(federation.device), "dtype": str(federation.dtype), **(config or {})}
    if checkpoint_every is not None and (checkpoint_every < 1 or out_dir is None):
        raise ValueError("checkpoint_every needs a value >= 1 and an out_dir")
    history = History(cfg) if history is None else history
    state = algorithm.init(federation, model, seed) if state is None else state
    start_wall = time.perf_counter()
    bar = tqdm(range(state.round, rounds), desc=cfg["algorithm"], unit="round",
               disable=not progress, dynamic_ncols=True)
    for _ in bar:
        state = algorithm.round(state, federation, model)
        if not state.is_finite():
            if out_dir is not None:
                history.save(out_dir)
            raise NonFiniteError(state.round, history)
        if state.round % eval_every == 0 or state.round == rounds:
            entry = evaluation_entry(algorithm, state, federation, model, train_loss=train_loss)
            entry["wall_seconds"] = round(time.perf_counter() - start_wall, 4)
            history.entries.append(entry)
            first = next((k for k, v in entry.items()
                          if k.endswith("_accuracy") and isinstance(v, float)), None)
            if first:
                bar.set_postfix({first: f"{entry[first]:.4f}"})
            if out_dir is not None:
                history.save(out_dir)
        if checkpoint_every and (state.round % checkpoint_every == 0 or state.round == rounds):
            save_checkpoint(Path(out_dir) / "checkpoint.pt", state, algorithm)
        if on_round is not None:
            on_round(state)
    return RunResult(history, state)
