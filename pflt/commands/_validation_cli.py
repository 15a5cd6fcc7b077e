"""What ``pflt select-k --validation`` and ``pflt select-stages --validation`` share: the fold
options (``--val-folds``, ``--val-cv``), their checks, and the progress bar over the runs."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager

from pflt.cli import UserError

MAX_FOLDS = 100


def add_fold_options(p: argparse.ArgumentParser, *, folds: int, folds_help: str) -> None:
    """``--val-folds`` (default ``folds``) and ``--val-cv`` (default: every fold in turn)."""
    p.add_argument("--val-folds", type=int, default=folds,
                   help=f"--validation: {folds_help} (default {folds})")
    p.add_argument("--val-cv", type=int, default=None,
                   help="--validation: how many of the val-folds serve in turn as the held-out "
                   "part, the criterion summed over them (default val-folds: full "
                   "cross-validation, the recommended selector; 1: one hold-out, 1/val-folds "
                   "of the cost)")
    p.add_argument("--no-progress", action="store_true",
                   help="--validation: no progress bar (the cost line is still printed)")


def check_fold_options(args: argparse.Namespace) -> None:
    """One-line errors for the fold options; ``--val-cv`` defaults to ``--val-folds``."""
    if not 2 <= args.val_folds <= MAX_FOLDS:
        raise UserError(f"--val-folds must lie in [2, {MAX_FOLDS}], got {args.val_folds}")
    if args.val_cv is None:
        args.val_cv = args.val_folds    # full cross-validation: the benchmarks' recommendation
    if not 1 <= args.val_cv <= args.val_folds:
        raise UserError(f"--val-cv must lie in [1, --val-folds = {args.val_folds}], got "
                        f"{args.val_cv}")


@contextmanager
def progress_bar(total: int, desc: str, unit: str, *, disable: bool):
    """A tqdm bar on stderr (``--json`` keeps stdout parseable); yields the ``progress(done,
    total)`` callback the validation functions take."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, disable=disable, file=sys.stderr)
    try:
        yield lambda done, _total: bar.update(done - bar.n)
    finally:
        bar.close()
