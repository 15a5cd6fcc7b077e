"""Slow tier: ``pflt data fetch`` killed with SIGKILL at random moments, its partial files
sometimes damaged afterwards, then fetched again — the re-fetch ends "verified" with every
file the loader reads holding the pinned content, or is refused in one line (and the fetch
after that ends verified); it never accepts corrupt bytes (issue 43).

The real Fashion-MNIST pins (registry) and Debian's copy as the data, served by a throttled
HTTP server on 127.0.0.1 in this process (~10 MB/s, so a kill lands before, during or after
each file); the fetch runs in a child process whose registry keeps only that mirror (no
network)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

DEBIAN = Path("/usr/share/datasets/fashion-mnist")
NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
#: the child: the real pins, no other source than the test's mirror
CHILD = ("import dataclasses, sys; from synthetic.real_data import registry; "
         "e = registry.entry('fmnist'); "
         "registry.ENTRIES['fmnist'] = dataclasses.replace(e, urls=(), system_dirs=()); "
         "from pflt.cli import main; raise SystemExit(main(sys.argv[1:]))")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not DEBIAN.is_dir(),
                                 reason="Debian's dataset-fashion-mnist not installed")]


@pytest.fixture(scope="module")
def mirror():
    data = {f"/fm/{n}": (DEBIAN / n).read_bytes() for n in NAMES}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = data.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start, rng = 0, self.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            try:
                for i in range(start, len(body), 1 << 18):      # 256 KiB every 25 ms
                    self.wfile.write(body[i:i + (1 << 18)])
                    time.sleep(0.025)
            except (BrokenPipeError, ConnectionResetError):   # the child was killed
                pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/fm/"
    httpd.shutdown()
    httpd.server_close()


def _fetch(d: Path, url: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, "data", "fetch", "fmnist", "--dir",
                             str(d), "--mirror", url, "--no-progress", "--timeout", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _loaded_content_is_debians(d: Path) -> bool:
    """Each file the loader reads (``x`` before ``x.gz``, synthetic.datasets' order) holds
    the decompressed bytes of Debian's copy (hashed here, independently of the fetcher)."""
    for name in NAMES:
        want = hashlib.sha256(gzip.decompress((DEBIAN / name).read_bytes())).digest()
        plain, gz = d / name[:-3], d / name
        path = plain if plain.is_file() else gz
        if not path.is_file():
            return False
        raw = path.read_bytes()
        if path == gz:
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error):     # a corrupt gzip is not Debian's
                return False
        if hashlib.sha256(raw).digest() != want:
            return False
    return True


def _damage(d: Path, rng: random.Random, what: str) -> str:
    """Damage what the killed fetch left (``what``): flip a byte of a partial file, truncate
    it, or flip a byte of a completed file; returns what was done ("none" if there was
    nothing to damage)."""
    parts = sorted(p for p in d.glob("*.part") if p.stat().st_size)
    done = sorted(p for p in d.glob("*.gz"))
    if what.endswith("part") and parts:
        p = rng.choice(parts)
        size = p.stat().st_size
        if size and what == "flip part":
            with open(p, "r+b") as fh:
                fh.seek(rng.randrange(size))
                b = fh.read(1)
                fh.seek(-1, os.SEEK_CUR)
                fh.write(bytes([b[0] ^ 0x40]))
        elif size:
            os.truncate(p, rng.randrange(size))
        return f"{what} {p.name}"
    if what == "flip done" and done:
        p = rng.choice(done)
        data = bytearray(p.read_bytes())
        data[rng.randrange(len(data))] ^= 0x40
        p.write_bytes(bytes(data))
        return f"{what} {p.name}"
    return "none"


def _kill_mid_download(child: subprocess.Popen, d: Path, rng: random.Random) -> None:
    """SIGKILL once a partial file has bytes (then a random 0–0.5 s later)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if any(p.stat().st_size for p in d.glob("*.part") if p.is_file()):
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.5))
    child.send_signal(signal.SIGKILL)


#: what each round does after its kill: the damaging rounds kill mid-download
ROUNDS = ("none", "flip part", "none", "truncate part", "flip done", "flip part", "none",
          "truncate part")


def test_kill9_then_refetch_is_verified_or_refused_never_corrupt(tmp_path, mirror):
    rng = random.Random(43)
    d = tmp_path / "d"
    outcomes, damaged = [], []
    for i, what in enumerate(ROUNDS):
        for done in d.glob("*.gz"):        # something to download again (parts are kept)
            if rng.random() < 0.75 or done.name == NAMES[0]:
                done.unlink()
        child = _fetch(d, mirror)
        if what == "none":
            time.sleep(rng.uniform(0.3, 6.0))      # any moment: imports, a file, between
            child.send_signal(signal.SIGKILL)
        else:
            _kill_mid_download(child, d, rng)
        child.communicate(timeout=60)
        damage = _damage(d, rng, what) if d.is_dir() else "none"
        damaged.append(damage)
        again = _fetch(d, mirror)
        out, err = again.communicate(timeout=300)
        if again.returncode == 0:
            assert "fmnist: verified" in out
            assert _loaded_content_is_debians(d), (i, damage, out)
            outcomes.append("verified")
        else:
            assert again.returncode == 2 and err.strip().count("\n") == 0, (i, damage, err)
            assert "error:" in err and "Traceback" not in err
            final = _fetch(d, mirror)          # a refusal removed the bad bytes: it heals
            out, err = final.communicate(timeout=300)
            assert final.returncode == 0 and _loaded_content_is_debians(d), (i, damage, err)
            outcomes.append("refused, then verified")
    assert "verified" in outcomes
    # the damage really reached partial files (else the rounds above tested nothing of it)
    assert sum(x.startswith(("flip part", "truncate part")) for x in damaged) >= 2, damaged
