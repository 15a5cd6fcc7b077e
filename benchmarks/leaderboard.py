"""The leaderboard: every registered algorithm at its paper defaults on four settings, over
seeds, through the toolkit's own sweep (``pflt sweep``) and reader (``pflt compare``'s
:mod:`pflt.aggregate`), reported per model **at the last and at the best evaluated round**
separately, with seconds per round.

Settings (one ``pflt sweep`` per algorithm and setting, in ``OUT/<setting>/<algorithm>/``, so
an algorithm that refuses a setting — e.g. CGPFL-Heur's e(K) needs m > d/e samples — is
reported as refused and the others still run; resumable: a finished point is not run again):

* ``synthetic`` — Synthetic(0.5, 0.5) (FedProx's generator), the pFedMe paper's data, each
  client capped at 200 samples (``--max-client-size 200``; the paper's largest clients hold
  ~25,000, which would make this setting cost more than the other three together);
* ``digits-label-skew`` — scikit-learn's digits (embedded), 2 classes per client;
* ``mnist5k-dirichlet`` — the embedded MNIST 5k subset, Dirichlet(0.5) labels;
* ``feature-shift`` — digits, IID labels, every client's images rotated / contrast-changed /
  noised (FedBN's setting, ``--partition feature-shift``).

Every algorithm runs with its paper defaults (``pflt list algorithms``) and the same model
(``--model dnn``, FedBN ``mlp-bn``: its batch-normalised twin; algorithms that need layers
get them from ``dnn``), ``N ≥ 10`` clients, each algorithm's default ``S`` (10) per round, ``T`` rounds, evaluation
every ``T/10`` rounds; nothing is tuned per dataset.  For each (setting, algorithm): the
headline model (the one its paper reports, :func:`pflt.aggregate.headline_model`) and every
model it evaluates under its own name, mean ± sd over seeds of the last-round and of the
best-round test accuracy (the best round is chosen on the test split, as the papers' tables
do: an optimistic figure, reported beside the last one, never instead of it), seconds per
round (wall time of the run / T, evaluation included), and whether the headline does better
than Local on that setting (mean last-round accuracy above Local's by more than the two
standard errors combined; ``no better than Local`` otherwise).

Writes ``OUT/leaderboard.csv`` (numeric), ``OUT/leaderboard.json`` (date, commit, machine,
load, N, T, seeds, refused runs), ``OUT/leaderboard.md`` (the tables of
docs/benchmark.md) and ``OUT/leaderboard.png`` (per setting, the headline accuracies ranked,
with ± sd error bars, last and best).

Usage: ``python benchmarks/leaderboard.py --out runs/leaderboard [--clients 20] [--rounds 50]
[--seeds 3] [--settings synthetic ...] [--algorithms fedavg pfedme ...] [--publish]``;
``--publish`` also copies the CSV and JSON to ``benchmarks/results/``, from which the
documentation's benchmark page is generated.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import datetime
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from paper_figures.leaderboard_table import (  # noqa: E402
    beats as _beats, judge_against_local, markdown)

SETTINGS = {
    "synthetic": {"data": "synthetic", "max_client_size": 200},
    "digits-label-skew": {"data": "digits", "partition": "label-skew"},
    "mnist5k-dirichlet": {"data": "mnist5k", "partition": "dirichlet", "dirichlet_alpha": 0.5},
    "feature-shift": {"data": "digits", "partition": "feature-shift"},
}
#: algorithms whose paper setting needs another model than the common one
MODEL_OF = {"fedbn": "mlp-bn"}


def _toml_value(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def sweep_file(setting: str, algorithms: list[str], seeds: int, clients: int, rounds: int) -> str:
    base = {"model": "dnn", "clients": clients, "rounds": rounds,
            "eval_every": max(1, rounds // 10), **SETTINGS[setting]}
    lines = [f"# leaderboard setting {setting} (benchmarks/leaderboard.py)"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in base.items()]
    lines += ["", "[sweep]", f"algorithm = {_toml_value(algorithms)}",
              f"seed = {_toml_value(list(range(seeds)))}"]
    for name in algorithms:
        if name in MODEL_OF:
            lines += ["", f"[algorithms.{name}]", f'model = "{MODEL_OF[name]}"']
    return "\n".join(lines) + "\n"


def seconds_per_round(run) -> float | None:
    walls = [e.get("wall_seconds") for e in run.entries if isinstance(e.get("wall_seconds"),
                                                                      (int, float))]
    rounds = run.entries[-1].get("round") if run.entries else None
    return walls[-1] / rounds if walls and rounds else None


def summarise(setting: str, sweep_dir: Path) -> list[dict]:
    """One row per (algorithm, model): last/best mean ± sd, n, s/round, headline flag."""
    from pflt.aggregate import expand_run_dirs, group_runs, load_run, mean_sd, models_of

    if not (sweep_dir / "sweep.jsonl").is_file():
        return []
    runs = [load_run(p) for p in expand_run_dirs([sweep_dir])]
    rows = []
    for g in group_runs(runs):
        done = [r for r in g.runs if r.finished]
        spr = mean_sd(seconds_per_round(r) for r in done)[0]
        headline = g.headline()
        for model in models_of(g.runs):
            metric = f"{model}_accuracy"
            last, best = g.stats(metric, "last"), g.stats(metric, "best")
            rows.append({"setting": setting, "algorithm": g.algorithm, "model": model,
                         "headline": model == headline,
                         "last_mean": last[0], "last_sd": last[1], "n": last[2],
                         "best_mean": best[0], "best_sd": best[1],
                         "seconds_per_round": spr, "unfinished": len(g.runs) - len(done)})
    return rows


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def figure(rows: list[dict], path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(r["setting"] for r in rows))
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 0.28 *
                             max(8, sum(r["headline"] for r in rows) / len(settings)) + 1.5),
                             squeeze=False)
    for ax, setting in zip(axes[0], settings):
        head = sorted((r for r in rows if r["setting"] == setting and r["headline"]
                       and math.isfinite(r["last_mean"])), key=lambda r: r["last_mean"])
        ys = range(len(head))
        for off, at, color in ((-0.18, "last", "tab:blue"), (0.18, "best", "tab:orange")):
            ax.errorbar([r[f"{at}_mean"] for r in head], [y + off for y in ys],
                        xerr=[r[f"{at}_sd"] if math.isfinite(r[f"{at}_sd"]) else 0 for r in head],
                        fmt="o", ms=3, color=color, capsize=2, label=f"{at} round")
        ax.set_yticks(list(ys), [f"{r['algorithm']} ({r['model']})" for r in head], fontsize=7)
        ax.set_xlabel("test accuracy (headline model)")
        ax.set_title(setting)
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    from algorithms.engine.base import registry
    from pflt.cli import main as pflt

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/leaderboard"))
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--algorithms", nargs="+", default=None,
                    help="default: every registered algorithm")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--progress", action="store_true", help="per-run progress bars")
    ap.add_argument("--publish", action="store_true",
                    help=f"also copy leaderboard.csv/.json to {PUBLISHED.relative_to(ROOT)}/ "
                         "(the docs' benchmark page: python -m paper_figures.docs_pages)")
    ap.add_argument("--device", default=None,
                    help="cpu or cuda[:K] for every run (default: as pflt run, cuda when "
                         "available)")
    args = ap.parse_args(argv)
    algorithms = args.algorithms or list(registry())
    unknown = sorted(set(algorithms) - set(registry()))
    if unknown:
        ap.error(f"unknown algorithm(s) {', '.join(unknown)}")
    if args.clients < 10:
        ap.error("--clients must be >= 10 (the algorithms' default clients per round)")
    if "local" not in algorithms:
        algorithms = ["local", *algorithms]          # the reference every row is judged by
    args.out.mkdir(parents=True, exist_ok=True)
    commit = _commit()                     # the code the runs use, not the one at the end
    rows, refused = [], []
    for setting in args.settings:
        for name in algorithms:
            where = args.out / setting / name
            where.parent.mkdir(parents=True, exist_ok=True)
            cfg = args.out / setting / f"{name}.toml"
            cfg.write_text(sweep_file(setting, [name], args.seeds, args.clients, args.rounds))
            argv_sweep = ["sweep", str(cfg), "--out", str(where)]
            if not args.progress:
                argv_sweep.append("--no-progress")
            if args.device:
                argv_sweep += ["--device", args.device]
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = pflt(argv_sweep)
            if code != 0:
                why = next((ln for ln in err.getvalue().splitlines() if "error" in ln),
                           f"exit code {code}")
                refused.append((setting, name, why.split("error: ", 1)[-1]))
                print(f"leaderboard: {setting} {name}: {why}", file=sys.stderr)
            rows += summarise(setting, where)
    rows = judge_against_local(rows)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    conditions = (f"{stamp}; N = {args.clients} clients, T = {args.rounds} rounds, "
                  f"{args.seeds} seed(s), --model dnn (FedBN mlp-bn), paper defaults; "
                  f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}"
                  + (f", --device {args.device}" if args.device else ""))
    with open(args.out / "leaderboard.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["setting"])
        writer.writeheader()
        writer.writerows(rows)
    environment = {"date": stamp, "commit": commit,
                   "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}",
                   "load": f"{os.getloadavg()[0]:.1f}"}
    (args.out / "leaderboard.json").write_text(json.dumps(
        {"environment": environment, "clients": args.clients, "rounds": args.rounds,
         "seeds": args.seeds, "refused": [list(r) for r in refused]}, indent=2) + "\n")
    if args.publish:                         # the files the documentation's page is made from
        PUBLISHED.mkdir(parents=True, exist_ok=True)
        for name in ("leaderboard.csv", "leaderboard.json"):
            (PUBLISHED / name).write_text((args.out / name).read_text())
    text = markdown(rows, conditions)
    if refused:
        text += "\n### Refused (the algorithm's own check stopped the run)\n\n" + "\n".join(
            f"- {setting}, {name}: {why}" for setting, name, why in refused) + "\n"
    (args.out / "leaderboard.md").write_text(text)
    figure(rows, args.out / "leaderboard.png")
    print(text)
    print(f"wrote {args.out / 'leaderboard.csv'}, leaderboard.md, leaderboard.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
