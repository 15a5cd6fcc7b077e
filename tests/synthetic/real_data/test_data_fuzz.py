"""Hypothesis fuzz of ``pflt data`` (issue 43): any arguments, any directory content — good,
corrupt, truncated, empty or huge sparse files, the plain copy beside the ``.gz``, links in
and out of the directory (dangling, looping), fifos, directories under a file's name,
planted ``.part`` files — and the command never raises a traceback, never touches a file
outside its directory, and never says "verified" unless every file the loader reads holds
the pinned content.  The pins are the test's own (conftest.fake_entry, content digests as
the real Fashion-MNIST's); the fetch's mirror is the local server of conftest.py."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import numpy as np

from pflt.cli import main
from synthetic.datasets import load_dataset
from synthetic.real_data import registry

FILE_STATES = ("absent", "good gz", "good plain", "both good", "corrupt gz", "corrupt plain",
               "good gz + corrupt plain", "truncated gz", "empty plain", "huge sparse plain",
               "link to good", "link to corrupt", "dangling link", "link loop", "fifo",
               "directory")
PART_STATES = ("absent", "link to victim", "foreign bytes", "fifo", "hard link to victim")


def _flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at % len(b)] ^= 0x01
    return bytes(b)


def _plant(d: Path, out: Path, name: str, state: str, gz: bytes) -> None:
    plain, raw = d / name[:-3], gzip.decompress(gz)
    if state in ("good gz", "both good", "good gz + corrupt plain"):
        (d / name).write_bytes(gz)
    if state in ("good plain", "both good"):
        plain.write_bytes(raw)
    if state in ("corrupt plain", "good gz + corrupt plain"):
        plain.write_bytes(_flip(raw, len(raw) - 1))          # a pixel or a label byte
    if state == "corrupt gz":
        (d / name).write_bytes(gzip.compress(_flip(raw, len(raw) - 1), mtime=0))
    if state == "truncated gz":
        (d / name).write_bytes(gz[: len(gz) // 2])
    if state == "empty plain":
        plain.write_bytes(b"")
    if state == "huge sparse plain":
        plain.touch()
        os.truncate(plain, 1 << 36)                          # 64 GiB, no block written
    if state in ("link to good", "link to corrupt"):
        target = out / f"{state[8:]}-{name}"
        target.write_bytes(gz if state == "link to good"
                           else gzip.compress(_flip(raw, 20), mtime=0))
        os.symlink(target, d / name)
    if state == "dangling link":
        os.symlink(out / "nowhere", d / name)
    if state == "link loop":
        os.symlink(d / name, d / name)
    if state == "fifo":
        os.mkfifo(plain)
    if state == "directory":
        (d / name).mkdir()


def _plant_part(d: Path, victim: Path, name: str, state: str, gz: bytes) -> None:
    part = d / f"{name}.part"
    if state == "link to victim":
        os.symlink(victim, part)
    elif state == "foreign bytes":
        part.write_bytes(_flip(gz[: len(gz) // 2], 7))
    elif state == "fifo":
        os.mkfifo(part)
    elif state == "hard link to victim":
        os.link(victim, part)


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def _loaded_is_pinned(d: Path, files: dict[str, bytes]) -> bool:
    """What the loader itself (``synthetic.datasets``, not the validation under test)
    reads from ``d`` is the pinned content, pixel for pixel and label for label."""
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x, y = load_dataset("mnist", d, subset=split)
        images = np.frombuffer(gzip.decompress(files[f"{prefix}-images-idx3-ubyte.gz"])[16:],
                               np.uint8)
        labels = np.frombuffer(gzip.decompress(files[f"{prefix}-labels-idx1-ubyte.gz"])[8:],
                               np.uint8)
        if not (np.array_equal(np.round(x.ravel() * 255).astype(np.uint8), images)
                and np.array_equal(y, labels.astype(np.int64))):
            return False
    return True


@pytest.fixture
def served(fakes, http_server):
    files = fakes.fake_idx_files()
    fakes.serve(http_server, "fm", files)
    entry = fakes.fake_entry("fmnist", files, urls=[http_server.url("fm")], pin="content")
    with registry.override({"fmnist": entry}):
        yield files, http_server.url("fm")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:          # argparse's usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@example(states=["good gz", "good gz + corrupt plain", "good gz", "good gz"], part="absent",
         part_file=0, command="verify", timeout="1")
@example(states=["good gz + corrupt plain", "good gz", "good gz", "good gz"], part="absent",
         part_file=0, command="fetch", timeout="1")
@example(states=["good gz", "good gz", "good gz", "absent"], part="link to victim",
         part_file=3, command="fetch", timeout="1")
@given(states=st.lists(st.one_of(st.just("good gz"), st.sampled_from(FILE_STATES)),
                       min_size=4, max_size=4),
       part=st.sampled_from(PART_STATES), part_file=st.integers(0, 3),
       command=st.sampled_from(["verify", "fetch", "fetch-timeout", "list"]),
       timeout=st.one_of(st.sampled_from(["inf", "nan", "-1", "0", "1e300", "x", "1e-9"]),
                         st.floats(allow_nan=True).map(repr)))
def test_any_directory_never_a_traceback_never_verified_on_bad_content(
        served, tmp_path, monkeypatch, states, part, part_file, command, timeout):
    files, url = served
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    d, out = root / "d", root / "outside"
    d.mkdir()
    out.mkdir()
    victim = out / "victim.txt"
    victim.write_bytes(b"not a download\n")
    names = list(files)
    for name, state in zip(names, states):
        _plant(d, out, name, state, files[name])
    _plant_part(d, victim, names[part_file], part, files[names[part_file]])
    before = _snapshot(out)
    monkeypatch.setenv("PFLT_DATA", str(root / "home"))
    argv = {"verify": ["data", "verify", f"fmnist:{d}"],
            "fetch": ["data", "fetch", "fmnist", "--dir", str(d), "--mirror", url,
                      "--no-progress", "--timeout", "20"],
            "fetch-timeout": ["data", "fetch", "fmnist", "--dir", str(d), "--mirror", url,
                              "--no-progress", "--timeout", timeout],
            "list": ["data", "list"]}[command]
    code, stdout, stderr = _run(argv)
    assert code in (0, 2), (argv, code, stderr)
    assert "Traceback" not in stderr
    if code == 2:
        assert stderr.strip().count("\n") == 0 and "error:" in stderr, stderr
    assert _snapshot(out) == before                     # nothing outside was written
    if code == 0 and "verified" in stdout:
        assert _loaded_is_pinned(d, files), (states, part, stdout)
    if command == "fetch" and code == 0:
        assert _loaded_is_pinned(d, files)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(st.one_of(
    st.sampled_from(["fetch", "verify", "list", "fmnist", "emnist", "mnist:", "cifar10",
                     "--dir", "--mirror", "--timeout", "--emnist-split", "letters",
                     "--no-progress", "fmnist:/nonexistent", "emnist:", ":", "", "-",
                     "file:///nonexistent/", "http://u:p@127.0.0.1:1/", "nan"]),
    st.text(max_size=12)), max_size=6))
def test_any_arguments_are_a_result_or_one_line(argv, tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp("args")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PFLT_DATA", str(root / "home"))
    # offline: a fetch that reaches for the network fails fast (no DNS, closed ports)
    monkeypatch.setattr("urllib.request.urlopen",
                        lambda *a, **k: (_ for _ in ()).throw(OSError("offline (test)")))
    code, _, stderr = _run(["data", *argv])
    assert code in (0, 2), (argv, stderr)
    assert "Traceback" not in stderr
    if code == 2 and stderr.strip():
        assert stderr.strip().count("\n") == 0, (argv, stderr)
