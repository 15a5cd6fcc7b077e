"""A file size limit (``ulimit -f``: Python ignores SIGXFSZ, so a write past it fails with
EFBIG) is one line naming the file being written, exit 2 — not ``[Errno 27] File too large``
with no file named, nor a "could not download" blaming the network (issue 43)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def _limited(argv, cwd, limit_bytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "pflt", *argv], cwd=cwd, preexec_fn=limit,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not DEBIAN.is_dir(), reason="Debian's dataset-fashion-mnist not installed")
def test_fetch_names_the_part_file_and_a_larger_limit_resumes(tmp_path):
    # mutation caught: the write error caught as a network error of the source
    argv = ["data", "fetch", "fmnist", "--dir", "d", "--mirror", DEBIAN.as_uri() + "/",
            "--no-progress"]
    proc = _limited(argv, tmp_path, 1 << 20)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("pflt data: error: d/train-images-idx3-ubyte.gz.part: "
                                   "File too large")
    done = subprocess.run([sys.executable, "-m", "pflt", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "fmnist: verified" in done.stdout, done.stderr


def test_per_client_names_the_png(tmp_path):
    run = tmp_path / "r"
    subprocess.run([sys.executable, "-m", "pflt", "run", "--clients", "3",
                    "--clients-per-round", "3", "--rounds", "1", "--local-rounds", "1",
                    "--no-progress", "--out", str(run)], check=True, capture_output=True)
    proc = _limited(["per-client", str(run), "--out", "pc"], tmp_path, 20 * 1024)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == ("pflt per-client: error: "
                                                    "pc/per_client.png: File too large")
    assert not (tmp_path / "pc" / "per_client.png").exists()
