"""``pflt run``: train a registered algorithm on a federation and save its history.

Every hyper-parameter of the chosen algorithm is an option with the algorithm's own default
(pfedme: pFedMe's synthetic setting λ=20, η=0.005, η_p=0.01, K=5, R=20, |D|=20, β=1, S=10);
an option it does not have is an error.

``--config run.toml``: the same options as keys (the command line overrides; unknown keys are
an error).  ``--checkpoint-every k`` + ``pflt run --resume OUT [--rounds T]``: continues a run
bit-identically (algorithms/engine/resume.py).  A used ``--out`` is refused unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pfl_theory.safe_files import atomic_write_text
from pflt.cli import UserError
from pflt.commands import run_options as opts

if TYPE_CHECKING:
    import torch


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="train an algorithm on a federation; write its history files",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       add_help=False)
    p.add_argument("-h", "--help", action="store_true",
                   help="show the options (with --algorithm NAME: that algorithm's only)")
    opts.add_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if getattr(args, "help", False):
        print(_help(args), end="")
        return 0
    options = opts.resolve(args)
    summary = execute(options, progress=not options["no_progress"])
    return 0 if summary is not None else 1


def _help(args) -> str:
    """The help for what was given: with ``--algorithm`` (or a ``--config`` file) that
    algorithm's hyper-parameters; with ``--config``, every value the file sets next to its
    option (the algorithm: the command line's, else the file's, else the default)."""
    given = "algorithm" in opts._explicit(getattr(args, "argv", []))
    if not args.config:
        return opts.help_text(args.algorithm if given else None, __doc__)
    valid = {k for k in vars(args) if k not in ("func", "command", "argv", "help")}
    config = opts.load_config(args.config, valid)
    algorithm = args.algorithm if given else config.get("algorithm", args.algorithm)
    return opts.help_text(algorithm, __doc__, config=config, source=Path(args.config).name)


def execute(options: dict, *, progress: bool = True) -> dict | None:
    """Run with fully resolved ``options`` (see :mod:`run_options`); returns the final
    summary (scalars of the last evaluation), or ``None`` if the run diverged.  ``OUT`` is
    locked for the run (:mod:`pflt.out_lock`)."""
    from pflt.out_lock import out_lock

    if options.get("resume") and not Path(options["resume"]).is_dir():
        raise UserError(f"--resume {options['resume']} is not a directory")

    with out_lock(options["out"]):
        return _execute(options, progress=progress)


def _client_chunk(options: dict, algorithm, model, fed) -> int | None:
    """``--client-chunk``, else the chunk that ``--memory-budget`` (default: half the
    available memory) allows (:func:`algorithms.engine.chunks.chunk_for_budget`); says so
    on stderr when a round's clients are trained in chunks."""
    from algorithms.engine.chunks import chunk_for_budget

    chunk = options.get("client_chunk")
    budget = options.get("memory_budget")
    if chunk is None:
        batch = int(getattr(algorithm, "batch_size", 20))
        chunk = chunk_for_budget(model, fed, batch,
                                 None if budget is None else int(budget * 2 ** 30))
    if chunk is not None and chunk < fed.num_clients:
        why = f"--client-chunk {chunk}" if options.get("client_chunk") else \
            f"memory budget {budget or 'default: half the available memory'}" + \
            (" GiB" if budget else "")
        print(f"training the clients {chunk} at a time ({why})", file=sys.stderr)
        return chunk
    return None


def _execute(options: dict, *, progress: bool) -> dict | None:
    from algorithms.engine.base import get_algorithm
    from algorithms.engine.models import build_model
    from algorithms.engine.resume import resume_point
    from algorithms.engine.run_dir import claim_out_dir
    from algorithms.engine.runner import DivergenceError, run as run_rounds, run_config
    from pflt.commands.run_checks import check_memory
    from synthetic.sources import build_federation
    import torch   # here, not at the top: pflt --help and pflt run --help import no torch

    out = Path(options["out"])
    algorithm = get_algorithm(options["algorithm"])(**options["hyperparameters"])
    from pfl_theory.threads import run_threads
    threads = options.get("threads") or run_threads(options["clients"])
    torch.set_num_threads(threads)   # the data build too; run() applies the same count
    spec = opts.data_spec(options)
    dtype = torch.float64 if options["dtype"] == "float64" else torch.float32
    check_memory(options)
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):  # non-finite data are reported below
        fed = build_federation(spec, device=options["device"], dtype=dtype)
    if not (all_finite(fed.train.x) and all_finite(fed.test.x)):
        from pflt.commands._run_data import scaling_options
        raise UserError(f"the data {fed.name} contain NaN or inf in {options['dtype']} "
                        f"({scaling_options(options)})")
    reuse = _partition_reuse(spec, fed)
    model = build_model(options["model"], fed, hidden=options["hidden"], l2=options["l2"])
    note = opts.schedule_note(algorithm, model, options["rounds"])
    if note:
        print(f"warning: {note}", file=sys.stderr)
    notes = opts.inert_notes(algorithm, model)
    leak = opts.test_split_reason(algorithm)
    if leak:
        print(f"warning: this run reads the test split: {leak}", file=sys.stderr)
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    if options.get("model_chosen"):
        print(f"{options['algorithm']} needs a layered model: using --model {options['model']} "
              "(pass --model to choose another)", file=sys.stderr)
    config = {"data": opts.data_dict(spec), "data_seed": options["data_seed"],
              "model_options": {"hidden": options["hidden"], "l2": options["l2"]}}
    cfg = run_config(algorithm, fed, model, rounds=options["rounds"], seed=options["seed"],
                     eval_every=options["eval_every"], config=config)
    state = history = None
    point = resume_point(out, algorithm, fed, model, seed=options["seed"], config=cfg,
                         device=fed.device) if options.get("resume") else None
    if point is not None:
        state, history = point
        if state.round >= options["rounds"]:
            raise UserError(f"the checkpoint is already at round {state.round}; "
                            f"pass --rounds larger than that to continue")
    else:
        if options.get("resume"):  # killed before its first checkpoint: replay from round 0
            print(f"{out} has no checkpoint: running again from round 0 with its saved "
                  "options", file=sys.stderr)
        claim_out_dir(out, cfg, overwrite=bool(options.get("overwrite")),
                      hint="pass --overwrite to replace it")
    atomic_write_text(out / "run_options.json", json.dumps(opts.saved(options), indent=1))
    marker = out / "diverged.json"      # an earlier attempt's (written below, by pflt)
    if marker.is_file() and not marker.is_symlink():
        marker.unlink()
    print(f"{options['algorithm']} on {fed.name}: N={fed.num_clients}, "
          f"{int(fed.train.counts.sum())} train / {int(fed.test.counts.sum())} test samples, "
          f"model={options['model']}, device={fed.device}"
          + (f", resuming at round {state.round}" if state else ""), file=sys.stderr)
    chunk = _client_chunk(options, algorithm, model, fed)
    from algorithms.engine.communication import counting
    try:
        with counting() as meter:
            result = run_rounds(algorithm, fed, model, rounds=options["rounds"],
                                seed=options["seed"], eval_every=options["eval_every"],
                                out_dir=out, progress=progress, state=state,
                                history=history, checkpoint_every=options["checkpoint_every"],
                                threads=threads, config=config, client_chunk=chunk,
                                estimate=True)
    except DivergenceError as exc:
        # the marker pflt compare reads: this run stopped by divergence, not by a kill
        atomic_write_text(out / "diverged.json", json.dumps(
            {"round": getattr(exc, "round", None), "reason": str(exc)}, indent=1))
        print(f"pflt run: error: {exc} (history in {out})", file=sys.stderr)
        return None
    last = result.history.last()
    summary = {k: v for k, v in last.items() if not isinstance(v, (list, dict))}
    if notes:
        summary["notes"] = notes
    if leak:
        summary["reads_test_split"] = leak
    if reuse:
        summary["partition_reuse"] = reuse
    summary.update(_selection_record(result.state))
    comm = meter.per_round()
    summary.update({f"communication_{k}_per_round": comm[k] for k in COMMUNICATION if comm})
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1))
    _print_summary(last, out, comm)
    return summary


def _selection_record(state) -> dict:
    """CGPFL-Heur's e(K) over K and the band of μ choosing each K (models' units), for
    ``summary.json``; printed as one line per band.  Empty for other methods."""
    t = state.tensors
    if "e_values" not in t or "mu_bands" not in t:
        return {}
    from algorithms.methods.clustered.cgpfl import mu_band_rows

    bands = [list(b) for b in mu_band_rows(t["mu_bands"])]
    k_hat = int(t["k_hat"])
    print(f"CGPFL-Heur: K_hat = {k_hat} at mu = {float(t['mu']):.4g}; band of mu per K:",
          file=sys.stderr)
    for k, lo, hi in bands:
        print(f"  K={k:<3d} mu in [{lo:.4g}, {hi:.4g})" + ("  <- K_hat" if k == k_hat else ""),
              file=sys.stderr)
    return {"e_of_k": [float(v) for v in t["e_values"].tolist()], "mu_bands": bands}


def _partition_reuse(spec, fed) -> dict | None:
    """A paper partition's image reuse (:mod:`synthetic.real_data.partition_overlap`),
    printed at start-up and saved in ``summary.json``; ``None`` for other partitions."""
    from synthetic.sources import PAPER_PARTITIONS

    if spec.partition not in PAPER_PARTITIONS or str(spec.data).startswith("synthetic"):
        return None
    from synthetic.real_data.partition_overlap import partition_reuse, reuse_line

    reuse = partition_reuse(fed)
    print(reuse_line(reuse), file=sys.stderr)
    return reuse


#: what ``summary.json`` says of the exchange, per round (:mod:`algorithms.engine.communication`)
COMMUNICATION = ("down_numbers", "down_bytes", "up_numbers", "up_bytes")


def communication_line(comm: dict) -> str:
    """``communication per round: down … numbers (… MiB), up …`` (binary units)."""
    from paper_figures.units import format_bytes

    return (f"communication per round (all participants, mean of {comm['rounds']} round(s)): "
            f"down {comm['down_numbers']:.4g} numbers ({format_bytes(comm['down_bytes'])}), "
            f"up {comm['up_numbers']:.4g} numbers ({format_bytes(comm['up_bytes'])})")


def all_finite(x: torch.Tensor, rows: int = 1 << 16) -> bool:
    """``torch.isfinite(x).all()`` a block of ``rows`` rows at a time: on the whole tensor
    its temporaries are ~1.6× ``x`` (1.3 GB for the 0.8 GB of ``pflt run --clients 10000``,
    which made it the run's peak memory)."""
    import torch

    return all(bool(torch.isfinite(block).all()) for block in x.split(rows))


def _number(v) -> str:
    """4 decimals for ordinary magnitudes, scientific notation otherwise (never wider than
    10 characters, so the table stays aligned for any value, inf and nan included)."""
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")) or v == 0 or 1e-3 <= abs(v) < 1e4:
        return f"{v:.4f}"
    return f"{v:.3e}"


def summary_table(entry: dict) -> list[str]:
    """The summary lines: one row per evaluated model, columns right-aligned to the widest
    cell."""
    names = [k[:-len("_accuracy")] for k, v in entry.items()
             if k.endswith("_accuracy") and isinstance(v, float)]
    head = ["model", "accuracy", "mean", "low5%", "top5%", "test loss"]
    rows = [[n] + [_number(entry.get(n + suffix, float("nan"))) for suffix in
                   ("_accuracy", "_accuracy_mean", "_accuracy_low5", "_accuracy_top5", "_loss")]
            for n in names]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join([r[0].ljust(widths[0])] +  # noqa: E731
                              [c.rjust(w) for c, w in zip(r[1:], widths[1:])])
    return [fmt(head)] + [fmt(r) for r in rows]


def _print_summary(entry: dict, out: Path, comm: dict | None = None) -> None:
    print(f"\nround {entry['round']}  ({entry.get('wall_seconds', 0):.1f} s)")
    for line in summary_table(entry):
        print(line)
    if comm:
        print(communication_line(comm))
    print(f"results: {out}/history.json, {out}/history.csv, {out}/summary.json")
