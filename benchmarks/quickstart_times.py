"""Time every line of the README's Quickstart and write benchmarks/results/quickstart_times.json.

The Quickstart block of the README is generated from that file
(:mod:`paper_figures.readme_blocks`), so the README's commands and their expected times come
from one run of this script, with its date, commit, machine and load average. Each command
runs in the repository root with its outputs under ``runs/quickstart/`` (git-ignored), one
after the other, as a new user would type them; a command's exit status is recorded (a
failing line is shown as such in the README, not hidden).

    python benchmarks/quickstart_times.py [--only N ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "quickstart_times.json"
Q = "runs/quickstart"

#: (command, what it does) — the README's Quickstart, in order
COMMANDS: list[tuple[str, str]] = [
    ("pflt --help", "the commands"),
    ("pflt list algorithms", "34 algorithms: paper, what it does, hyper-parameters"),
    (f"pflt run --algorithm pfedme --rounds 20 --out {Q}/pfedme",
     "pFedMe on Synthetic(0.5, 0.5), 100 clients"),
    (f"pflt run --algorithm cgpfl --rounds 20 --seed 1 --out {Q}/cgpfl", "CGPFL, K = 4 contexts"),
    (f"pflt compare {Q}/pfedme {Q}/cgpfl --metric '*_accuracy' --out {Q}/cmp",
     "last and best round side by side, CSV + curves"),
    (f"pflt verify --quick --only pfedme.envelope_gradient --out {Q}/verify-one",
     "one check: verdict, evidence, sensitivity"),
    (f"pflt verify --quick --kind bound --out {Q}/verify-bound",
     "every numerical bound check, report.md + results.json"),
    ("pflt worst-case --algorithm pfedme --prox exact --clients 2 --rounds 3 --local-rounds 5 "
     "--beta 1 --lr 0.05 --lam 15 --mu 0.1 --L 1", "exact worst case (PEP) beside the bound"),
    ("pflt select-k --planted 40,4,20 --json", "CGPFL's K from the e(K) heuristic"),
    ("pflt select-stages --gamma 0.1 --kappa0 0.5 --n 200 --t-max 200",
     "PPFE's number of stages from its bound"),
    ("pflt formulas --section B.6", "a formula: paper, equation, reading, function"),
    ("pflt flower-sim --algorithm ifca --clients 10 --rounds 5 --dtype float64 --compare",
     "the same algorithm on Flower, difference to the engine"),
    ("pflt data list", "real datasets: where found, verified, how to fetch"),
]


def _load() -> str:
    try:
        return "{:.1f}".format(os.getloadavg()[0])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", type=int, nargs="*", help="indices of COMMANDS to time")
    args = ap.parse_args(argv)
    shutil.rmtree(ROOT / Q, ignore_errors=True)
    env = {**os.environ, "MPLBACKEND": "Agg", "FLWR_TELEMETRY_ENABLED": "0"}
    load_before = _load()
    rows = []
    for i, (command, what) in enumerate(COMMANDS):
        if args.only and i not in args.only:
            continue
        start = time.perf_counter()
        proc = subprocess.run(command, shell=True, cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        print(f"{seconds:7.1f} s  rc={proc.returncode}  {command}", file=sys.stderr)
        rows.append({"command": command, "what": what, "seconds": round(seconds, 2),
                     "returncode": proc.returncode,
                     "stderr_tail": proc.stderr[-300:] if proc.returncode else ""})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    data = {"environment": {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
        "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
        "load": f"{load_before} before, {_load()} after"}, "commands": rows}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}; README: python -m paper_figures.readme_blocks",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
