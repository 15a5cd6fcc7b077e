"""synthetic/real_data/fetch.py against a local HTTP server (127.0.0.1, in this process):
good files, a changed byte, a truncated file, a 404 mirror, a dropped connection resumed with
Range, a server that never answers, two concurrent fetches.  Pins are computed by the test
from the bytes it serves (conftest.fake_entry)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
import threading
import zipfile

import pytest

from synthetic.real_data import registry
from synthetic.real_data.fetch import FetchError, fetch
from synthetic.real_data.load import load_validated
from synthetic.real_data.registry import PinnedFile
from synthetic.real_data.validate import DataMismatch

IDX_NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


@pytest.fixture
def files(fakes):
    return fakes.fake_idx_files()


@pytest.fixture
def fake_entry(fakes):
    return fakes.fake_entry


@pytest.fixture
def serve(fakes):
    return fakes.serve


def _fetch(fake_entry, name, dest, server, files, *, prefix="a", mirrors=(), **kw):
    entry = fake_entry(name, files, urls=[server.url(prefix)])
    with registry.override({name: entry}):
        return fetch(name, dest, mirrors, progress=kw.pop("progress", None), **kw)


def test_good_files_arrive_verified_with_a_progress_bar(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: bytes written to the wrong file / progress bar without ETA or size
    serve(http_server, "a", files)
    bar = io.StringIO()
    _fetch(fake_entry, "fake", tmp_path, http_server, files, progress=bar)
    for name in IDX_NAMES:
        assert (tmp_path / name).read_bytes() == files[name]
        assert not (tmp_path / f"{name}.part").exists()
    text = bar.getvalue()
    assert "ETA" in text and "MB" in text and "train-images-idx3-ubyte.gz" in text
    with registry.override({"fake": fake_entry("fake", files)}):
        x, _ = load_validated("fake", tmp_path, "train")
    assert x.shape == (60, 1, 28, 28)


def test_one_changed_byte_is_one_line_naming_file_expected_found(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: digest not checked, or the bad file kept
    bad = dict(files)
    name = "train-labels-idx1-ubyte.gz"
    data = bytearray(files[name])
    data[-10] ^= 0xFF
    bad[name] = bytes(data)
    serve(http_server, "a", bad)
    with pytest.raises(DataMismatch) as err:
        _fetch(fake_entry, "fake", tmp_path, http_server, files)
    msg = str(err.value)
    assert "\n" not in msg and name in msg
    assert hashlib.md5(files[name]).hexdigest() in msg          # expected
    assert hashlib.md5(bytes(data)).hexdigest() in msg          # found
    assert not (tmp_path / name).exists() and not (tmp_path / f"{name}.part").exists()


def test_truncated_file_is_refused_by_its_size(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: size not checked (a truncated file served as complete)
    name = "t10k-images-idx3-ubyte.gz"
    short = dict(files)
    short[name] = files[name][: len(files[name]) // 2]
    serve(http_server, "a", short)
    with pytest.raises(DataMismatch, match=f"{name}.*expected {len(files[name])} bytes, "
                       f"found {len(short[name])}"):
        _fetch(fake_entry, "fake", tmp_path, http_server, files)
    assert not (tmp_path / name).exists()


def test_404_on_the_first_mirror_then_the_second(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: mirrors not tried in order / --mirror not tried first
    serve(http_server, "m1", files, mode="404")
    serve(http_server, "a", files)
    _fetch(fake_entry, "fake", tmp_path, http_server, files, mirrors=[http_server.url("m1")])
    first = IDX_NAMES[0]
    order = [p for p, _ in http_server.log if p.endswith(first)]
    assert order == [f"/m1/{first}", f"/a/{first}"]
    assert (tmp_path / first).read_bytes() == files[first]


def test_dropped_connection_is_resumed_with_range(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: restart from zero (no Range) or appending at the wrong offset
    name = IDX_NAMES[0]
    cut = len(files[name]) // 2
    serve(http_server, "a", {name: files[name]}, mode="drop", cut=cut)
    serve(http_server, "a", {k: v for k, v in files.items() if k != name})
    _fetch(fake_entry, "fake", tmp_path, http_server, files)
    assert http_server.requests_for(f"/a/{name}") == [None, f"bytes={cut}-"]
    assert (tmp_path / name).read_bytes() == files[name]


def test_interrupted_fetch_leaves_nothing_a_loader_reads_and_resumes(tmp_path, http_server,
                                                                     files, fake_entry, serve):
    # mutation caught: writing to the final name before verification
    name = IDX_NAMES[0]
    cut = len(files[name]) // 3
    serve(http_server, "a", {name: files[name]}, mode="drop", cut=cut)
    serve(http_server, "a", {k: v for k, v in files.items() if k != name})
    with pytest.raises(FetchError, match="offline: put"):
        _fetch(fake_entry, "fake", tmp_path, http_server, files, attempts=1)
    assert not (tmp_path / name).exists()
    assert (tmp_path / f"{name}.part").stat().st_size == cut
    with registry.override({"fake": fake_entry("fake", files)}):
        with pytest.raises(FileNotFoundError, match="train-images"):
            load_validated("fake", tmp_path)
    _fetch(fake_entry, "fake", tmp_path, http_server, files)          # the next fetch resumes
    assert http_server.requests_for(f"/a/{name}")[-1] == f"bytes={cut}-"
    assert (tmp_path / name).read_bytes() == files[name]


def test_a_server_that_never_answers_times_out_in_one_line(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: no socket timeout (the test would hang), multi-line error
    serve(http_server, "a", files, mode="hang")
    with pytest.raises(FetchError) as err:
        _fetch(fake_entry, "fake", tmp_path, http_server, files, timeout=0.3)
    msg = str(err.value)
    assert "\n" not in msg and "timed out" in msg
    assert f"in {tmp_path}" in msg and "pflt data verify fake:" in msg
    assert not any(tmp_path.glob("*.gz"))


def test_two_concurrent_fetches_share_one_download(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: no lock — both download (each file requested twice) into one .part
    serve(http_server, "a", files)
    entry = fake_entry("fake", files, urls=[http_server.url("a")])
    errors = []

    def run():
        try:
            fetch("fake", tmp_path, progress=None)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with registry.override({"fake": entry}):
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors
    for name in IDX_NAMES:
        assert (tmp_path / name).read_bytes() == files[name]
        assert len(http_server.requests_for(f"/a/{name}")) == 1


def test_an_existing_good_copy_is_kept_a_bad_one_replaced(tmp_path, http_server, files, fake_entry, serve):
    # mutation caught: re-downloading verified files / trusting a corrupt local copy
    serve(http_server, "a", files)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / IDX_NAMES[1]).write_bytes(b"garbage")
    _fetch(fake_entry, "fake", tmp_path, http_server, files)
    assert [p for p, _ in http_server.log] == [f"/a/{IDX_NAMES[1]}"]
    assert (tmp_path / IDX_NAMES[1]).read_bytes() == files[IDX_NAMES[1]]


def _archive_entry(fakes, files, kind, data, urls):
    """An entry whose IDX files come out of a zip (EMNIST's layout: gzip/NAME) or a tar.gz
    (CIFAR's: DIR/NAME) pinned by its MD5 (``data``'s)."""
    base = fakes.fake_entry("arch", files, urls=urls)
    member_dir = "gzip" if kind == "zip" else "batches"
    members = tuple(dataclasses.replace(f, member=f"{member_dir}/{f.name}") for f in base.files)
    name = "gzip.zip" if kind == "zip" else "fake-python.tar.gz"
    return dataclasses.replace(base, files=members, archive=PinnedFile(
        name, md5=hashlib.md5(data).hexdigest(), size=len(data)))


def _make_archive(kind, files):
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in files.items():
                zf.writestr(f"gzip/{name}", data)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(f"batches/{name}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_archives_are_verified_then_unpacked_member_by_member(tmp_path, http_server, fakes,
                                                              kind):
    # mutation caught: members not extracted / extracted without their own pin
    files = fakes.fake_idx_files()
    data = _make_archive(kind, files)
    entry = _archive_entry(fakes, files, kind, data, [http_server.url("z")])
    http_server.routes[f"/z/{entry.archive.name}"] = fakes.Route(data)
    with registry.override({"arch": entry}):
        fetch("arch", tmp_path, progress=None)
        _, y = load_validated("arch", tmp_path)
    assert len(y) == 90
    for name, blob in files.items():
        assert (tmp_path / name).read_bytes() == blob
    # an archive whose own bytes match its pin but whose member does not match its pin
    bad = dict(files)
    bad[IDX_NAMES[1]] = files[IDX_NAMES[0]]
    data2 = _make_archive(kind, bad)
    entry2 = _archive_entry(fakes, files, kind, data2, [http_server.url("z2")])
    http_server.routes[f"/z2/{entry2.archive.name}"] = fakes.Route(data2)
    out = tmp_path / "second"
    with registry.override({"arch": entry2}), pytest.raises(DataMismatch, match=IDX_NAMES[1]):
        fetch("arch", out, progress=None)
    assert not (out / IDX_NAMES[1]).exists()


def test_without_dir_a_verified_system_copy_is_used_and_nothing_downloaded(
        tmp_path, http_server, fakes, monkeypatch):
    # mutation caught: downloading into the home although Debian's copy verifies
    files = fakes.fake_idx_files()
    system = fakes.write_files(tmp_path / "usr-share", files)
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "home"))
    fakes.serve(http_server, "a", files)
    entry = fakes.fake_entry("fake", files, urls=[http_server.url("a")], system_dirs=[system])
    with registry.override({"fake": entry}):
        assert fetch("fake", progress=None) == system
        assert http_server.log == []
        (system / IDX_NAMES[2]).write_bytes(b"bad")          # no longer verifies: download
        assert fetch("fake", progress=None) == tmp_path / "home" / "fake"
    assert len(http_server.log) == 4


def test_a_server_ignoring_range_restarts_the_file(tmp_path, http_server, files, serve,
                                                   fake_entry):
    # mutation caught: appending a full 200 body after the partial bytes
    name = IDX_NAMES[0]
    cut = len(files[name]) // 2
    serve(http_server, "a", {name: files[name]}, mode="drop", cut=cut, ranges=False)
    serve(http_server, "a", {k: v for k, v in files.items() if k != name})
    _fetch(fake_entry, "fake", tmp_path, http_server, files)
    assert http_server.requests_for(f"/a/{name}") == [None, f"bytes={cut}-"]
    assert (tmp_path / name).read_bytes() == files[name]
