"""CGPFL Table 1's tuning protocol (the paper's competitors were "fine-tuned to their best
performances", values unpublished): the same lr grid and budget for every method, chosen on
a validation split held out of the training data, reported on test.

1. ``pflt reproduce cgpfl_table1_fmnist_tune`` runs every row at every lr of :data:`TUNE_LRS`
   (T = 200, seed 0) with ``--validation-fraction 0.2``: each client's training split loses
   20 % to a validation split, which is what the run evaluates; the test split is never built.
2. :func:`choose` takes, per method and column, the lr with the highest last-round
   validation accuracy (the smaller lr on ties).
3. :func:`tuned_reproduction` is Table 1 with each method at its chosen lr, on the test split,
   seeds 0, 1, 2; :func:`side_by_side` puts the printed-setting row, the tuned row and the
   chosen lr beside the paper's number.

``python -m verification.experiments.reproduction_tune GRID.csv`` prints the choices and the
tuned cells' ``pflt run`` commands.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from verification.experiments.reproduction import Reproduction, cells
from verification.experiments.reproductions import (CGPFL_TABLE1_FMNIST, TUNE_LRS,  # noqa: F401
                                                     TUNE_SEP as SEP, VALIDATION_FRACTION,
                                                     cgpfl_rows, tune_label)


def choose(rows: list[dict]) -> dict:
    """``{(method, column): (lr, validation accuracy %)}`` from the tuning grid's CSV rows
    (finished ones), the best last-round value per method and column, smaller lr on ties."""
    best: dict = {}
    for r in rows:
        if r.get("status", "ok") not in ("ok", "") or SEP not in r["method"]:
            continue
        method, lr = r["method"].rsplit(SEP, 1)
        key, cand = (method, r["column"]), (float(r["value"]) * 100, -float(lr))
        if key not in best or cand > best[key]:
            best[key] = cand
    return {k: (-nlr, v) for k, (v, nlr) in best.items()}


def tuned_reproduction(base: Reproduction, rows_at, choices: dict) -> Reproduction:
    """``base`` with each row's hyper-parameters those of ``rows_at(lr)`` at its chosen lr,
    per column (``column_hp``); rows without a choice keep the printed setting."""
    at = {}
    out = []
    for row in base.rows:
        per = {}
        for col in base.columns:
            if (row.label, col.key) in choices:
                lr = choices[(row.label, col.key)][0]
                at.setdefault(lr, {r.label: r for r in rows_at(lr)})
                per[col.key] = dict(at[lr][row.label].hp)
        out.append(replace(row, column_hp={**row.column_hp, **per}))
    return replace(base, name=base.name + "_tuned", rows=tuple(out),
                   notes=base.notes + " Tuned rows: each method at the lr chosen on the "
                   "validation split (cgpfl_table1_fmnist_tune), reported on test.")


def side_by_side(base: Reproduction, printed: dict, tuned: dict, choices: dict) -> str:
    """Markdown: per column, paper | printed setting | tuned | chosen lr (validation %).
    ``printed``/``tuned``: ``{(method, column): (mean %, sd %, seeds)}``."""
    def fmt(v):
        return "–" if v is None else (f"{v[0]:.2f} ± {v[1]:.2f}" if v[2] > 1 else f"{v[0]:.2f}")
    lines = []
    for col in base.columns:
        lines += [f"## {col.key}", "", "| method | paper | printed setting | tuned | chosen lr "
                  "(validation %) |", "|---|---|---|---|---|"]
        for row in base.rows:
            k = (row.label, col.key)
            ch = choices.get(k)
            lines.append(f"| {row.label} | {base.numbers.get(k, '–')} | {fmt(printed.get(k))} | "
                         f"{fmt(tuned.get(k))} | "
                         + (f"{ch[0]:g} ({ch[1]:.2f})" if ch else "not tuned") + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    from verification.experiments.reproduction_run import read_rows

    p = argparse.ArgumentParser(description="CGPFL Table 1: lr chosen on validation")
    p.add_argument("grid_csv", help="the CSV of `pflt reproduce cgpfl_table1_fmnist_tune`")
    args = p.parse_args(argv)
    choices = choose(read_rows(args.grid_csv))
    for (m, c), (lr, v) in sorted(choices.items()):
        print(f"{m} on {c}: lr = {lr:g} (validation {v:.2f} %)")
    tuned = tuned_reproduction(CGPFL_TABLE1_FMNIST, lambda lr: cgpfl_rows(lr=lr), choices)
    for c in cells(tuned):
        print(c.command(None, f"runs/reproduce/{tuned.name}/{c.run_name}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
