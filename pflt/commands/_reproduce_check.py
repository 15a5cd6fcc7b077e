"""What ``pflt reproduce`` checks before its first cell runs, so that a bad request fails at
once with one line instead of as a hole in the table:

* :func:`check_cell_options` — every ``--option`` is an option of ``pflt run``, and each
  distinct cell's command line passes ``pflt run``'s own parsing and checks (ranges, types,
  options that do not apply to the row's algorithm, ``--rounds`` beyond 2³¹ − 1 …);
* :func:`check_data` — each dataset is verified once: its files' digests and every split's
  sample and class counts (:func:`synthetic.real_data.load.verify_directory`);
* :func:`check_setups` — each distinct cell's federation is built from those data (once per
  partition), its model built and its algorithm initialised on them: a partition the data
  cannot give, ``clients_per_round`` above the number of clients, CGPFL-Heur's e(K) on too
  few samples fail here, not in the middle of the table.

Every failure is a :class:`~pflt.cli.UserError` naming the row and column (exit 2).
"""

from __future__ import annotations

import argparse

from pflt.cli import UserError, one_line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse API: raise, never exit
        raise UserError(message)


def _run_parser() -> argparse.ArgumentParser:
    from pflt.commands import run_options as opts

    p = _Parser(prog="pflt run", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    opts.add_options(p)
    return p


def _distinct(cells) -> list:
    """One cell per (row, column): the seed changes nothing that is checked here."""
    seen, out = set(), []
    for c in cells:
        if (c.row.label, c.column.key) not in seen:
            seen.add((c.row.label, c.column.key))
            out.append(c)
    return out


def check_cell_options(cells, overrides: dict, data_dir, runs_root) -> dict:
    """``{(row, column): resolved pflt run options}``; :class:`UserError` for an
    ``--option`` that ``pflt run`` does not have, or a cell that ``pflt run`` would refuse."""
    from pathlib import Path

    from pflt.commands import run_options as opts

    parser = _run_parser()
    known = set(parser._option_string_actions)
    for key in overrides:
        if "--" + key.replace("_", "-") not in known:
            raise UserError(f"--option {key}=…: pflt run has no option "
                            f"--{key.replace('_', '-')} (see pflt run --help)")
    resolved = {}
    for c in _distinct(cells):
        argv = c.argv(data_dir, str(Path(runs_root) / c.reproduction / c.run_name))
        where = f"{c.row.label} on {c.column.key}"
        try:
            args = parser.parse_args(argv)
            args.argv = argv
            resolved[(c.row.label, c.column.key)] = opts.resolve(args)
        except (UserError, ValueError, OverflowError, TypeError) as exc:
            raise UserError(f"{where}: {one_line(exc)}"
                            + (f" (with --option {c.options_text})" if c.overrides else ""))
    return resolved


def check_data(datasets, data_dir) -> list[str]:
    """Verify each dataset once (digests of its files, counts of its splits); returns one
    line per dataset saying what was verified where."""
    from synthetic.real_data.home import resolve_dataset
    from synthetic.real_data.load import verify_directory

    lines = []
    for name in sorted(datasets):
        root = data_dir if data_dir is not None else resolve_dataset(name)
        try:
            found = verify_directory(name, root)
        except (ValueError, OSError) as exc:
            raise UserError(f"{name} in {root}: {one_line(exc)} (nothing was run)")
        lines.append(f"{name} in {root}: {len(found)} files and splits verified")
    return lines


def check_setups(cells, resolved: dict) -> None:
    """Build each distinct cell's federation, model and initial state (see the module
    docstring); :class:`UserError` naming the cell for what fails."""
    import torch

    from algorithms.engine.base import get_algorithm
    from algorithms.engine.models import build_model
    from pflt.commands import run_options as opts
    from pflt.commands.run_checks import check_memory
    from synthetic.sources import build_federation

    feds: dict = {}
    for c in _distinct(cells):
        options = resolved[(c.row.label, c.column.key)]
        where = f"{c.row.label} on {c.column.key}"
        try:
            check_memory(options)
            spec = opts.data_spec(options)
            dtype = torch.float64 if options["dtype"] == "float64" else torch.float32
            key = (repr(spec), options["device"], str(dtype))
            if key not in feds:
                feds[key] = build_federation(spec, device=options["device"], dtype=dtype)
            fed = feds[key]
            model = build_model(options["model"], fed, hidden=options["hidden"],
                                l2=options["l2"])
            algorithm = get_algorithm(options["algorithm"])(**options["hyperparameters"])
            algorithm.init(fed, model, options["seed"])
        except (UserError, ValueError, OSError, OverflowError, MemoryError) as exc:
            raise UserError(f"{where}: {one_line(exc)}"
                            + (f" (with --option {c.options_text})" if c.overrides else "")
                            + " (nothing was run)")
