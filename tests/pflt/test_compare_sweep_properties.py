"""Property tests (issue 23, deliverable 5 for compare and sweep): real run directories,
sweep directories and sweep TOML files mutated by hypothesis — a value replaced anywhere
in a JSON file (lists for objects, numbers for entries, ``null`` seeds, deep nesting,
NaN), files truncated, deleted, replaced by bytes or links — and every outcome is success
or exit 1/2 with exactly one error line, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pflt.cli import main
from pflt.commands import compare

#: examples per property; the default keeps each test a few seconds (PFLT_PROPERTY_EXAMPLES=300
#: for a thorough run)
EXAMPLES = int(os.environ.get("PFLT_PROPERTY_EXAMPLES", "0")) or None

TINY = ("algorithm = 'fedavg'\nclients = 4\nclients_per_round = 2\nrounds = 1\n"
        "local_rounds = 1\nmax_client_size = 20\n")
FILES = ["r0/history.json", "r0/history.jsonl", "r0/summary.json", "r0/run_options.json",
         "r1/history.json", "sw/sweep.jsonl", "sw/point-000/history.json",
         "sw/point-001/summary.json"]


def _quiet(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


def _assert_contract(code, err):
    assert "Traceback" not in err, err
    assert code in (0, 1, 2), (code, err)
    if code != 0:
        errors = [ln for ln in err.splitlines() if "error" in ln]
        assert len(errors) == 1, err


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("template")
    for seed in (0, 1):
        code, err = _quiet(["run", "--algorithm", "fedavg", "--clients", "4",
                            "--clients-per-round", "2", "--rounds", "2", "--local-rounds", "1",
                            "--max-client-size", "20", "--seed", str(seed), "--no-progress",
                            "--out", str(root / f"r{seed}")])
        assert code == 0, err
    (root / "s.toml").write_text(TINY + "[sweep]\nseed = [0, 1]\n")
    code, err = _quiet(["sweep", str(root / "s.toml"), "--out", str(root / "sw"),
                        "--no-progress"])
    assert code == 0, err
    return root


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:4]):
            yield from _paths(v, prefix + (i,))


def _set(obj, path, value):
    if not path:
        return value
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


def _dumps(value) -> str:
    return json.dumps(value)      # NaN / Infinity as Python's json writes them


@st.composite
def mutations(draw):
    name = draw(st.sampled_from(FILES))
    kind = draw(st.sampled_from(["value", "value", "value", "truncate", "delete", "bytes",
                                 "deep", "link", "line"]))
    return name, kind, draw(st.data())


def _mutate(root: Path, name: str, kind: str, data) -> None:
    path = root / name
    if kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "truncate" and path.exists():
        text = path.read_bytes()
        path.write_bytes(text[:data.draw(st.integers(0, max(len(text) - 1, 0)))])
    elif kind == "bytes":
        path.write_bytes(data.draw(st.binary(max_size=40)))
    elif kind == "deep":
        depth = data.draw(st.sampled_from([50, 3000]))
        path.write_text("[" * depth + "]" * depth)
    elif kind == "link":
        path.unlink(missing_ok=True)
        path.symlink_to(data.draw(st.sampled_from([root, path, root / "nowhere"])))
    elif kind == "line" and path.exists():     # one line of a JSON-lines file replaced
        lines = path.read_text(errors="replace").splitlines() or [""]
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = _dumps(data.draw(json_values))
        path.write_text("\n".join(lines) + "\n")
    elif path.exists():
        try:
            obj = json.loads(path.read_text(errors="replace").splitlines()[0] if name.endswith("l")
                             else path.read_text(errors="replace"))
        except (ValueError, IndexError, RecursionError):
            obj = None
        where = data.draw(st.sampled_from(list(_paths(obj))))
        new = _set(obj, where, data.draw(json_values))
        text = _dumps(new)
        if name.endswith(".jsonl"):
            rest = path.read_text(errors="replace").splitlines()[1:]
            text = "\n".join([text, *rest]) + "\n"
        path.write_text(text)


@settings(max_examples=EXAMPLES or 20, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(muts=st.lists(mutations(), min_size=1, max_size=2),
       given_dirs=st.sampled_from([["r0", "r1"], ["sw"], ["r0", "sw", "r0"], ["r1", "sw"]]))
def test_compare_on_mutated_runs_is_success_or_one_line(template, muts, given_dirs,
                                                         monkeypatch):
    # the readers are under test, not matplotlib: drawing costs seconds per example (the
    # figure itself: test_compare_sweep_cli.py and the slow variant below)
    if not os.environ.get("PFLT_PROPERTY_PLOT"):
        monkeypatch.setattr(compare, "plot", lambda groups, metrics, path: path)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        shutil.copytree(template, root, symlinks=True)
        for name, kind, data in muts:
            _mutate(root, name, kind, data)
        code, err = _quiet(["compare", *(str(root / d) for d in given_dirs),
                            "--out", str(root / "cmp")])
        _assert_contract(code, err)
        if os.environ.get("PFLT_PROPERTY_LOG"):
            with open(os.environ["PFLT_PROPERTY_LOG"], "a") as fh:
                last = err.strip().splitlines()[-1] if err.strip() else ""
                fh.write(f"compare\t{code}\t{last}\n")


@settings(max_examples=EXAMPLES or 10, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mut=mutations().filter(lambda m: m[0].startswith("sw/")))
def test_resuming_a_mutated_sweep_is_success_or_one_line(template, mut):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        shutil.copytree(template, root, symlinks=True)
        _mutate(root, *mut)
        code, err = _quiet(["sweep", str(root / "s.toml"), "--out", str(root / "sw"),
                            "--no-progress"])
        _assert_contract(code, err)


# ---- sweep TOML files ------------------------------------------------------------------

KEYS = ["lr", "seed", "rounds", "clients", "l2", "batch_size", "hidden", "model", "nope",
        "local_rounds", "dtype", "max_client_size"]
toml_scalars = st.sampled_from(
    ["0", "-1", "1e-5", "-1e-5", "1e30", "-1e30", "nan", "inf", "-inf", "1.5", "2",
     "'x'", "''", "true", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", "{a = 1}",
     "[[1]]", "[]", "'fedavg'", "'pfedme'", "'zzz'", "9" * 30])


@st.composite
def sweep_files(draw):
    base = draw(st.dictionaries(st.sampled_from(KEYS), toml_scalars, max_size=3))
    swept = draw(st.dictionaries(st.sampled_from(KEYS + ["algorithm"]),
                                 st.lists(toml_scalars, min_size=0, max_size=2), max_size=2))
    tables = draw(st.sampled_from(["", "[algorithms.fedavg]\nlr = 0.1\n",
                                   "[algorithms.zzz]\nlr = 1\n", "[algorithms]\nx = 1\n",
                                   "[a.b.c]\nx = 1\n", "[hyperparameters]\nlr = -1e-5\n"]))
    lines = [TINY] + [f"{k} = {v}" for k, v in base.items()] + ["[sweep]"]
    lines += [f"{k} = [{', '.join(v)}]" for k, v in swept.items()]
    return "\n".join(lines) + "\n" + tables


@settings(max_examples=EXAMPLES or 25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=sweep_files())
def test_sweep_on_hostile_toml_is_success_or_one_line(text):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "s.toml"
        cfg.write_text(text)
        code, err = _quiet(["sweep", str(cfg), "--out", str(Path(tmp) / "o"),
                            "--no-progress"])
        _assert_contract(code, err)
        if code == 2:
            assert "base.toml" not in err, err      # the user's file is named, not ours
