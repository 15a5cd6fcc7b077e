"""Property test of ``pflt reproduce``'s options (issue 43): for any name, seeds, rounds,
columns, methods, ``--option`` and ``--jobs``, valid or not, the outcome is exit 0 or exit 2
with exactly one error line — never a traceback, never another exit code, and a refused
request writes nothing.  The first property runs ``--dry-run`` (no data); the second runs
the checks that need the data (small files in the real format) with the cells themselves
replaced by a stub that records what would run."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pflt.cli import main
from synthetic.real_data import registry
from verification.experiments.reproductions import REPRODUCTIONS

NAMES = sorted(REPRODUCTIONS)
COLUMNS = sorted({c.key for r in REPRODUCTIONS.values() for c in r.columns})
METHODS = sorted({r.label for rep in REPRODUCTIONS.values() for r in rep.rows}
                 | {r.algorithm for rep in REPRODUCTIONS.values() for r in rep.rows})
KEYS = ["clients", "clients_per_round", "lr", "lam", "hidden", "partition", "size_range",
        "classes_per_client", "local_rounds", "seed", "rounds", "algorithm", "out", "beta",
        "num_contexts", "dtype", "threads", "batch_size", "frobnicate", "", "--lr", "l2"]
VALUES = ["4", "0", "-1", "1e400", "nan", "inf", "0.01", "x", "", "20 30", "label-skew",
          "cgpfl", "99999999999", "float64", "--out", "3 2", "é"]
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF),
               max_size=8)
HUGE = st.integers(min_value=-3, max_value=10**12)
SEEDS = st.sampled_from([0, 1, 2]) | HUGE        # duplicates drawn often


def _accepted_option_keys() -> set[str]:
    """The --option keys a run may replace: pflt run's options less the cell's own."""
    from pflt.commands._reproduce_check import _run_parser
    from verification.experiments.reproduction import FIXED_OPTIONS

    flags = _run_parser()._option_string_actions
    return {f[2:].replace("-", "_") for f in flags if f.startswith("--")} - set(FIXED_OPTIONS)


def _call(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:       # argparse's own exit, if it ever escaped main
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def _option():
    return st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS) | TEXT,
                     st.sampled_from(VALUES) | TEXT) | TEXT


def _argv(draw, name):
    argv = ["reproduce", name]
    if draw(st.booleans()):
        argv += ["--seeds", *map(str, draw(st.lists(SEEDS, min_size=1, max_size=4)))]
    if draw(st.booleans()):
        argv += ["--rounds", str(draw(HUGE))]
    if draw(st.booleans()):
        argv += ["--columns", *draw(st.lists(st.sampled_from(COLUMNS) | TEXT, min_size=1,
                                             max_size=3))]
    if draw(st.booleans()):
        argv += ["--methods", *draw(st.lists(st.sampled_from(METHODS) | TEXT, min_size=1,
                                             max_size=3))]
    for opt in draw(st.lists(_option(), max_size=3)):
        argv += ["--option", opt]
    if draw(st.booleans()):
        argv += ["--jobs", str(draw(st.integers(min_value=-2, max_value=400)))]
    return argv


def _check(rc, out, err, tmp: Path):
    assert "Traceback" not in err + out, err
    assert rc in (0, 2), (rc, err)
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0], err
        assert not (tmp / "out").exists() and not (tmp / "runs").exists()


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_dry_run_options_fuzz(data):
    # mutations caught: an --option, seed or rounds value reaching a traceback (int('x'),
    # OverflowError) or exit 0 with a refused option; a duplicate seed accepted
    name = data.draw(st.sampled_from(NAMES) | TEXT)
    argv = _argv(data.draw, name)
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = _call([*argv, "--dry-run", "--out", f"{tmp}/out",
                              "--runs-dir", f"{tmp}/runs"])
        _check(rc, out, err, Path(tmp))
    if rc == 0:
        assert "cells (" in out.splitlines()[0]
        seeds = argv[argv.index("--seeds") + 1:] if "--seeds" in argv else []
        seeds = seeds[:next((i for i, a in enumerate(seeds) if a.startswith("--")), len(seeds))]
        assert len(set(seeds)) == len(seeds)            # duplicates never pass
        keys = {argv[i + 1].partition("=")[0].strip().lstrip("-").replace("-", "_")
                for i, a in enumerate(argv) if a == "--option"}
        assert keys <= _accepted_option_keys()          # unknown or the cell's own: refused


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_options_fuzz_with_the_data_checks(data, real_format_data, monkeypatch, tmp_path_factory):
    # the checks that need the data: the partition each --option asks for, the clients per
    # round, each algorithm's initial state; the cells are a stub (they are tested elsewhere)
    from verification.experiments import reproduction_run

    ran = []
    monkeypatch.setattr(reproduction_run, "run_cells",
                        lambda cells, *a, **k: ran.append(len(cells)) or [])
    base = tmp_path_factory.mktemp("fmnist")
    d, entry = real_format_data(base / "fmnist", "fmnist")
    argv = ["reproduce", "cgpfl_table1_fmnist", "--seeds", "0", "--rounds", "1",
            "--columns", "fmnist_mlr", "--methods", *data.draw(st.lists(
                st.sampled_from(["fedavg", "cgpfl", "APFL", "pfedme", "ditto"]), min_size=1,
                max_size=2, unique=True))]
    for opt in data.draw(st.lists(_option(), max_size=4)):
        argv += ["--option", opt]
    with tempfile.TemporaryDirectory() as tmp, registry.override({"fmnist": entry}):
        rc, out, err = _call([*argv, "--data-dir", str(d), "--out", f"{tmp}/out",
                              "--runs-dir", f"{tmp}/runs"])
        _check(rc, out, err, Path(tmp))
    assert (rc == 0) == bool(ran)
