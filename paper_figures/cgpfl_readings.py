"""The open readings of CGPFL's FMNIST setting, each measured once (seed 0, MLR, T = 200):
``paper_figures/results/readings/cgpfl_fmnist.csv`` (not a reproduction table: its own folder) and its block in docs/reproduction.md.

CGPFL (IJCAI 2022 §5.1) leaves open: pixel scaling (pFedMe's generator, on which CGPFL's
code builds, standardises every pixel: ``--standardize true``), pFedMe's personal step η_p
(``--personal-lr``; pFedMe's public MNIST commands use 0.1 for MLR), whether "PM" is θ̃_i or
the public code's w_{i,R} (pFedMe's ``local`` model, recorded by every pFedMe run), and the
ℓ2 term of its "ℓ2-regularised MLR" (``--l2``, coefficient unprinted: 0.001 measured).

``python -m paper_figures.cgpfl_readings --collect`` reads the run directories (git-ignored)
and writes the CSV; without ``--collect`` it only rewrites the docs block from the CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "paper_figures" / "results" / "readings" / "cgpfl_fmnist.csv"
TABLE1 = ROOT / "paper_figures" / "results" / "cgpfl_table1_fmnist.csv"
DOC = ROOT / "docs" / "reproduction.md"
START, END = "<!-- cgpfl-readings:start -->", "<!-- cgpfl-readings:end -->"
FIELDS = ("reading", "method", "value", "printed", "paper", "command")
PAPER_MLR = {"FedAvg": 82.44, "pFedMe (PM)": 85.49, "CGPFL (K=4)": 92.65, "CGPFL-Heur": 95.18}

#: reading -> (source: an ablation CSV of `pflt reproduce … --out DIR`, or run directories)
ABLATIONS = {"pixels standardised (--standardize true)": "runs/ablate_std",
             "MLR ℓ2 term (--l2 0.001)": "runs/ablate_l2"}
_BASE = ("pflt run --data fmnist --model mlr --partition cgpfl --clients 40 --lr 0.005 "
         "--lam 12.0 --inner-steps 5 --local-rounds 10 --rounds 200 --eval-every 5 --seed 0 "
         "--data-seed 0 --overwrite --no-progress --personal-lr 0.1 ")
#: reading -> {method: its run directory and command} (`--option personal_lr` is not applied
#: by `pflt reproduce` to rows without it, so these are plain `pflt run` commands)
DIRECT = {"η_p = 0.1 (--personal-lr 0.1)": {
    "pFedMe (PM)": _BASE + "--algorithm pfedme --clients-per-round 40 "
                           "--out runs/ablate_direct/pfedme_etap0.1",
    "CGPFL (K=4)": _BASE + "--algorithm cgpfl --alpha 1.0 --num-contexts 4 "
                           "--out runs/ablate_direct/cgpfl4_etap0.1"}}


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _printed(method: str) -> float | None:
    for r in _rows(TABLE1):
        if r["method"] == method and r["column"] == "fmnist_mlr" and r["seed"] == "0" \
                and r["status"] == "ok" and not r.get("options"):
            return 100 * float(r["value"])
    return None


def _summary(run_dir: Path) -> dict | None:
    p = run_dir / "summary.json"
    return json.loads(p.read_text()) if p.is_file() else None


def collect() -> list[dict]:
    """Every measured reading (rows whose run finished), from the run directories."""
    out = []
    for reading, folder in ABLATIONS.items():
        path = ROOT / folder / "cgpfl_table1_fmnist.csv"
        for r in _rows(path) if path.is_file() else []:
            if r["status"] == "ok" and r["column"] == "fmnist_mlr" and r["seed"] == "0":
                out.append(dict(reading=reading, method=r["method"],
                                value=100 * float(r["value"]), command=r["command"]))
    for reading, runs in DIRECT.items():
        for method, command in runs.items():
            s = _summary(ROOT / command.split("--out ")[1].split()[0])
            if s and s.get("round") == 200:
                out.append(dict(reading=reading, method=method,
                                value=100 * s["personalized_accuracy"], command=command))
    for r in _rows(TABLE1):   # PM = w_{i,R}: the same pFedMe runs, their `local` model
        if r["method"] == "pFedMe (PM)" and r["column"] == "fmnist_mlr" and r["seed"] == "0":
            argv = shlex.split(r["command"])
            s = _summary(ROOT / argv[argv.index("--out") + 1])
            if s and "local_accuracy" in s:
                out.append(dict(reading="PM = w_{i,R} (the public code's local model)",
                                method="pFedMe (PM)", value=100 * s["local_accuracy"],
                                command=r["command"]))
    for r in out:
        r["printed"] = _printed(r["method"])
        r["paper"] = PAPER_MLR.get(r["method"])
    return out


def write_csv(rows: list[dict]) -> None:
    with CSV.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.2f}" if isinstance(r[k], float) else
                            ("" if r[k] is None else r[k])) for k in FIELDS})


def block() -> str:
    """The docs block: one line per measured reading, from the CSV only."""
    lines = [START, "",
             f"Generated by `python -m paper_figures.cgpfl_readings` from `{CSV.name}` "
             "(FMNIST, MLR, seed 0, T = 200, the new partition; accuracy %):", "",
             "| reading | method | with the reading | printed setting | effect | paper |",
             "|---|---|---|---|---|---|"]
    rows = _rows(CSV) if CSV.is_file() else []
    for r in rows:
        eff = (f"{float(r['value']) - float(r['printed']):+.2f}" if r["printed"] else "–")
        lines.append(f"| {r['reading']} | {r['method']} | {r['value']} | "
                     f"{r['printed'] or '–'} | {eff} | {r['paper'] or '–'} |")
    if not rows:
        lines.append("| (none measured yet) | | | | | |")
    return "\n".join(lines + ["", END])


def write_docs() -> None:
    text = DOC.read_text()
    if START in text:
        head, rest = text.split(START, 1)
        text = head + block() + rest.split(END, 1)[1]
    else:
        text = text.replace("## Adding a table", block() + "\n\n## Adding a table", 1)
    DOC.write_text(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--collect", action="store_true", help="read the run directories first")
    args = p.parse_args(argv)
    if args.collect:
        write_csv(collect())
    write_docs()
    print(f"wrote {CSV if args.collect else ''} {DOC}".strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
