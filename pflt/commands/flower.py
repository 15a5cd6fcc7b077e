"""``pflt flower-sim``: run a registered algorithm as a local Flower simulation;
``pflt flower-outcome OUT``: the exit status of a Flower *deployment* run (``flwr run``
exits 0 whatever happens; the ServerApp writes ``OUT/outcome.json``).

The same options as ``pflt run`` (algorithm, hyper-parameters, data, model, ``--config``
TOML); each client of the federation becomes one Flower SuperNode holding only its own
data, the server runs :class:`algorithms.flower.strategy.PFLStrategy`.  ``--backend ray``
uses Flower's simulation engine (``flwr.simulation.run_simulation``, ClientApps in Ray
worker processes; start-up takes tens of seconds; if Ray cannot start, one line and exit
1 after Ray's start-up timeout), ``--backend inprocess`` (default) the
same ServerApp/ClientApp objects over an in-process grid.  ``--compare`` also runs the
in-process batched engine with the same seed and prints the largest difference over the
state's models and tensors (0 or float round-off — e.g. 2.8e-16 for pFedMe in float64 at
10 clients, where the engine's products batched over clients round differently from
Flower's one-client ones — for every registered algorithm: the Flower run executes the
algorithm's own client/server functions on the same draws).  Clients that fail
or time out are left out of that round's aggregation and listed under ``failures``.
``--checkpoint-every k`` writes ``OUT/checkpoint.pt`` (the full state, collected from the
clients) every k rounds; ``--resume OUT --rounds T`` continues that run to round T.
Writes ``flower_history.json`` and ``flower_summary.json`` to ``--out``.  Divergence
(non-finite state or loss, a loss above 1e3 × its initial value) stops the run as ``pflt
run``'s does: exit 1 naming the round, history and ``diverged.json`` kept.  Needs the extra
``flower`` (from the checkout: ``pip install -e ".[flower]"``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from pathlib import Path

from pfl_theory.safe_files import atomic_write_text
from pflt.cli import UserError
from pflt.commands import run_options as opts


def add_parser(sub) -> None:
    p = sub.add_parser("flower-sim", help="run an algorithm as a local Flower simulation",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    opts.add_options(p)
    f = p.add_argument_group("flower")
    f.add_argument("--backend", default="inprocess", choices=["inprocess", "ray"],
                   help="inprocess grid (fast) or Flower's Ray simulation engine")
    f.add_argument("--cpus-per-client", type=float, default=1.0,
                   help="Ray: CPUs reserved per ClientApp actor (default 1)")
    f.add_argument("--compare", action="store_true",
                   help="also run the in-process engine and print the max parameter difference")
    f.add_argument("--flower-log", default="warning", choices=["warning", "info"],
                   help="level of Flower's own log on stderr (default: warning — its per-round "
                        "INFO lines would bury the summary; info shows them)")
    p.set_defaults(func=run)
    o = sub.add_parser("flower-outcome", help="exit status of a Flower deployment run (flwr run "
                       "exits 0 whatever happens)", description=OUTCOME_DOC,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    o.add_argument("out", help="the run's out-dir (run config 'out-dir' on the SuperLink machine)")
    o.add_argument("--allow-failed-clients", action="store_true",
                   help="exit 0 for a run that completed with clients left out")
    o.set_defaults(func=outcome)


OUTCOME_DOC = """Read OUT/outcome.json, written by the Flower deployment's ServerApp
(algorithms.flower.app) at the end of a run, print it and exit with its truth: 0 the run
completed with every client in every exchange; 1 it completed with clients left out
(failures in OUT/history.json; 0 with --allow-failed-clients) or it failed (no result:
the error is printed; Flower also shows the run as failed in `flwr ls`).  `flwr run
--stream` itself exits 0 once the run ends, whatever its outcome.

  flwr run . my-superlink --stream && pflt flower-outcome /srv/pflt/pfedme-run
"""


def outcome(args) -> int:
    path = Path(args.out) / "outcome.json"
    if not path.is_file():
        raise UserError(f"{path} not found (is {args.out} the run config's out-dir, on the "
                        f"SuperLink machine, and has the run ended?)")
    try:
        result = json.loads(path.read_text())
        status = result["status"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not an outcome file ({exc})") from None
    if status not in ("completed", "completed-with-failures", "failed"):
        raise UserError(f"{path}: unknown status {status!r}")
    line = f"{status}: round {result.get('round')}"
    if status == "failed":
        line = f"failed: {result.get('error')}"
    elif status == "completed-with-failures":
        line += (f", clients left out of some exchange {result.get('clients_left_out')}, "
                 f"missing at the end (NaN rows in state.pt) "
                 f"{result.get('clients_missing_at_end')}; see {Path(args.out) / 'history.json'}")
    print(line)
    if status == "completed" or (status == "completed-with-failures"
                                 and args.allow_failed_clients):
        return 0
    return 1


def run(args) -> int:
    from algorithms.flower import INSTALL_HINT
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    options = opts.resolve(args)
    from pflt.out_lock import out_lock
    with out_lock(options["out"]):
        return _run_locked(args, options)


def _run_locked(args, options: dict) -> int:
    from algorithms.engine.checkpoint import load_checkpoint
    from algorithms.engine.models import build_model
    from algorithms.flower.local import simulate
    from algorithms.flower.records import Settings
    from synthetic.sources import build_federation
    import torch   # here, not at the top: pflt --help imports no torch

    if options.get("threads"):
        torch.set_num_threads(options["threads"])
    dtype = torch.float64 if options["dtype"] == "float64" else torch.float32
    fed = build_federation(opts.data_spec(options), device="cpu", dtype=dtype)
    algorithm = options_algorithm(options)
    settings = Settings.of(algorithm, num_clients=fed.num_clients, seed=options["seed"],
                           model=options["model"], hidden=options["hidden"], l2=options["l2"])
    out = Path(options["out"])
    notes = opts.inert_notes(algorithm, settings.build_model(fed))
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    state = None
    if options.get("resume"):
        state = load_checkpoint(out / "checkpoint.pt", algorithm)
        if state.round >= options["rounds"]:
            raise UserError(f"the checkpoint is already at round {state.round}; "
                            f"pass --rounds larger than that to continue")
    atomic_write_text(out / "run_options.json", json.dumps(opts.saved(options), indent=1))
    print(f"{options['algorithm']} under Flower ({args.backend}): N={fed.num_clients} clients, "
          f"{options['rounds']} rounds, model={options['model']}"
          + (f", resuming at round {state.round}" if state else ""), file=sys.stderr)
    every = options.get("checkpoint_every")
    from algorithms.flower.local import RaySimulationError
    try:
        with flower_log_level(args.flower_log):
            result = simulate(settings, fed, rounds=options["rounds"],
                              eval_every=options["eval_every"], backend=args.backend,
                              cpus_per_client=args.cpus_per_client,
                              threads=options.get("threads") or 1, state=state,
                              checkpoint=out / "checkpoint.pt" if every else None,
                              checkpoint_every=every, errors_as_replies=True)
    except RaySimulationError as exc:
        from pflt.cli import one_line
        print(f"pflt flower-sim: error: {one_line(exc)}", file=sys.stderr)
        return 1
    if result.divergence is not None:     # the same contract and exit status as pflt run
        atomic_write_text(out / "flower_history.json", json.dumps(result.history, indent=1))
        atomic_write_text(out / "diverged.json", json.dumps(
            {"round": result.divergence.round, "reason": str(result.divergence)}, indent=1))
        print(f"pflt flower-sim: error: {result.divergence} (history in {out})",
              file=sys.stderr)
        return 1
    last = result.history[-1] if result.history else {}
    summary = {k: v for k, v in last.items()}
    summary["failures"] = result.failures
    if notes:
        summary["notes"] = notes
    if args.compare:
        from algorithms.engine.runner import run as run_engine
        model = build_model(options["model"], fed, hidden=options["hidden"], l2=options["l2"])
        ref = run_engine(algorithm, fed, model, rounds=options["rounds"], seed=options["seed"],
                         eval_every=options["rounds"], progress=False).state
        summary["max_abs_difference_vs_engine"] = max_difference(result.state, ref)
    atomic_write_text(out / "flower_history.json", json.dumps(result.history, indent=1))
    atomic_write_text(out / "flower_summary.json", json.dumps(summary, indent=1))
    for key, value in summary.items():
        print(f"{key:<32}{value}")
    print(f"results: {out}/flower_history.json, {out}/flower_summary.json")
    return 0


@contextlib.contextmanager
def flower_log_level(level: str):
    """Flower's logger (``flwr``) at ``level`` inside the block, as it was after."""
    logger = logging.getLogger("flwr")
    before = logger.level
    logger.setLevel(logging.WARNING if level == "warning" else logging.INFO)
    try:
        yield
    finally:
        logger.setLevel(before)


def options_algorithm(options: dict):
    from algorithms.engine.base import get_algorithm
    return get_algorithm(options["algorithm"])(**options["hyperparameters"])


def max_difference(a, b) -> float:
    """Largest absolute difference over all models and tensors of two engine states (same
    keys and shapes)."""
    if set(a.models) != set(b.models) or set(a.tensors) != set(b.tensors):
        raise ValueError(f"states differ: {sorted(a.models)} {sorted(a.tensors)} vs "
                         f"{sorted(b.models)} {sorted(b.tensors)}")
    pairs = [(a.models[m][k], b.models[m][k]) for m in b.models for k in b.models[m]]
    pairs += [(a.tensors[k], b.tensors[k]) for k in b.tensors]
    for x, y in pairs:
        if x.shape != y.shape:
            raise ValueError(f"shapes differ: {tuple(x.shape)} vs {tuple(y.shape)}")
    return max((float((x.double() - y.double()).abs().max()) for x, y in pairs if y.numel()),
               default=0.0)
