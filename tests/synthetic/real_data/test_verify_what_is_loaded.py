"""What ``pflt data fetch``/``verify`` check is what the loader reads (issue 43.4), and a
file's size is compared (``stat``) before any byte is hashed or read (issue 43's hang: a
50 GB sparse file as the uncompressed images was hashed for > 300 s)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pflt.cli import main
from synthetic.datasets import load_dataset
from synthetic.real_data import registry
from synthetic.real_data.load import load_validated
from synthetic.real_data.validate import find_file

IMAGES = "train-images-idx3-ubyte.gz"
DEBIAN = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture
def content_pinned(tmp_path, fakes, http_server):
    """'fmnist' pinned by content digests (as the real one), served by the local server;
    ``d`` holds the good ``.gz`` files plus a plain train-images copy with one pixel byte
    changed (the split checks cannot see a pixel)."""
    files = fakes.fake_idx_files()
    fakes.serve(http_server, "fm", files)
    entry = fakes.fake_entry("fmnist", files, urls=[http_server.url("fm")], pin="content")
    d = fakes.write_files(tmp_path / "d", files)
    raw = bytearray(gzip.decompress(files[IMAGES]))
    raw[-1] ^= 0x01
    (d / IMAGES[:-3]).write_bytes(bytes(raw))
    with registry.override({"fmnist": entry}):
        yield d, files


def test_find_file_picks_the_copy_the_loader_reads(content_pinned):
    # mutation caught: find_file preferring x.gz while synthetic.datasets reads x first
    d, files = content_pinned
    pinned = next(p for p in registry.entry("fmnist").files if p.name == IMAGES)
    assert find_file(d, pinned) == d / IMAGES[:-3]
    x, _ = load_dataset("mnist", d, subset="train")
    want = np.frombuffer(gzip.decompress(files[IMAGES])[16:], np.uint8)
    assert (np.round(x.ravel() * 255) != want).sum() == 1      # the loader read the plain copy


def test_verify_refuses_a_bad_plain_copy_beside_a_good_gz(content_pinned, capsys):
    # mutation caught: verifying the .gz while the loader reads the plain file ("verified")
    d, _ = content_pinned
    assert main(["data", "verify", f"fmnist:{d}"]) == 2
    captured = capsys.readouterr()
    assert "verified" not in captured.out
    err = captured.err.strip()
    assert err.count("\n") == 0 and f"{d / IMAGES[:-3]}: expected content sha256" in err


def test_fetch_ends_with_what_the_loader_reads_verified(content_pinned, capsys):
    # mutation caught: fetch keeping the corrupt plain copy and printing "verified"
    d, files = content_pinned
    assert main(["data", "fetch", "fmnist", "--dir", str(d), "--no-progress"]) == 0
    assert "fmnist: verified" in capsys.readouterr().out
    assert not (d / IMAGES[:-3]).exists()
    x, _ = load_validated("fmnist", d, "train")
    want = np.frombuffer(gzip.decompress(files[IMAGES])[16:], np.uint8)
    assert np.array_equal(np.round(x.ravel() * 255).astype(np.uint8), want)


def test_a_huge_file_is_refused_from_its_size_without_reading_it(content_pinned, tmp_path,
                                                                  capsys):
    # mutation caught: check_size not called first (the content hashed, or read by the loader)
    d, _ = content_pinned
    plain = d / IMAGES[:-3]
    os.truncate(plain, 50 << 30)               # sparse: no block written
    want = registry.entry("fmnist").files[0].content_size
    t0 = time.process_time()
    assert main(["data", "verify", f"fmnist:{d}"]) == 2
    assert f"{plain}: expected {want} bytes, found {50 << 30}" in capsys.readouterr().err
    run = ["run", "--data", f"fmnist:{d}", "--clients", "3", "--partition", "iid",
           "--rounds", "1", "--out", str(tmp_path / "r"), "--no-progress"]
    assert main(run) == 2
    assert f"expected {want} bytes, found {50 << 30}" in capsys.readouterr().err
    gz = d / IMAGES
    plain.unlink()
    os.truncate(gz, 50 << 30)                  # a .gz is bounded by zlib's worst case
    assert main(["data", "verify", f"fmnist:{d}"]) == 2
    assert f"{gz}: expected at most" in capsys.readouterr().err
    # 1 s of CPU: hashing 50 GB takes minutes (tolerance: the commands' imports and the
    # small files' checks take ~0.1 s on the shared machine)
    assert time.process_time() - t0 < 5


@pytest.mark.skipif(not DEBIAN.is_dir(), reason="Debian's dataset-fashion-mnist not installed")
def test_the_real_fmnist_with_a_50_gb_sparse_file_is_refused_at_once(tmp_path):
    # the case, through the installed command and the real pins
    d = tmp_path / "d"
    d.mkdir()
    for f in DEBIAN.glob("*.gz"):
        os.symlink(f, d / f.name)
    sparse = d / "train-images-idx3-ubyte"
    sparse.touch()
    os.truncate(sparse, 50 << 30)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pflt", "data", "verify", f"fmnist:{d}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"pflt data: error: {sparse}: expected 47040016 bytes, "
                                   f"found {50 << 30}")
    assert time.monotonic() - t0 < 60      # hashing 50 GB: > 300 s (the issue)
