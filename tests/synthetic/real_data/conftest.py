"""Fakes for the real-data tests: tiny datasets in the real file formats (gzipped IDX), their
pins computed here with hashlib from the bytes written here (never by the code under test),
and a local HTTP server on 127.0.0.1 that misbehaves on request."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import struct
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from synthetic.real_data.registry import DatasetEntry, PinnedFile, SplitPins

N_TRAIN, N_TEST, CLASSES = 60, 30, 10   # 6 / 3 samples per class
IDX_NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def idx_bytes(arr: np.ndarray) -> bytes:
    """IDX from LeCun's description: 0, 0, 0x08 (ubyte), ndim, big-endian dims, bytes."""
    arr = np.asarray(arr, dtype=np.uint8)
    return (struct.pack(">BBBB", 0, 0, 0x08, arr.ndim)
            + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes())


def fake_idx_files(n_train=N_TRAIN, n_test=N_TEST, classes=CLASSES, hw=(28, 28), seed=0,
                   test_pixel=None) -> dict[str, bytes]:
    """Gzipped IDX files of an MNIST-like dataset: labels ``i mod classes``; train pixels in
    0..200, test pixels ``test_pixel`` if given (so a test can tell the splits apart)."""
    rng = np.random.default_rng(seed)
    out = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = np.arange(n) % classes
        images = rng.integers(0, 201, size=(n, *hw))
        if prefix == "t10k" and test_pixel is not None:
            images[:] = test_pixel
        out[f"{prefix}-images-idx3-ubyte.gz"] = gzip.compress(idx_bytes(images), mtime=0)
        out[f"{prefix}-labels-idx1-ubyte.gz"] = gzip.compress(idx_bytes(labels), mtime=0)
    return out


def write_files(root, files: dict[str, bytes]):
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


def fake_entry(name: str, files: dict[str, bytes], *, urls=(), n_train=N_TRAIN,
               n_test=N_TEST, classes=CLASSES, home=None, system_dirs=(),
               pin="md5") -> DatasetEntry:
    """A registry entry pinning ``files`` (MD5 + size of each, or ``pin="content"``: the
    SHA-256 of the gunzipped bytes) and the splits' counts (labels ``i mod classes``)."""
    pins = []
    for fname, data in files.items():
        if pin == "md5":
            pins.append(PinnedFile(fname, md5=hashlib.md5(data).hexdigest(), size=len(data)))
        else:
            raw = gzip.decompress(data)
            pins.append(PinnedFile(fname, content_sha256=hashlib.sha256(raw).hexdigest(),
                                   content_size=len(raw)))
    splits = {"train": SplitPins(n_train, classes, (1, 28, 28), (n_train // classes,) * classes),
              "test": SplitPins(n_test, classes, (1, 28, 28), (n_test // classes,) * classes)}
    return DatasetEntry(name, f"fake {name}", "mnist", tuple(pins), splits, tuple(urls),
                        home or name, system_dirs=tuple(system_dirs))


# ----------------------------------------------------------------------------- HTTP server
@dataclass
class Route:
    """What the server does for one path: ``mode`` ``ok`` (honours ``Range`` unless
    ``ranges=False``), ``404``,
    ``drop`` (first request: the full ``Content-Length`` but only ``cut`` bytes, then the
    connection closes; later requests as ``ok``), ``hang`` (never answers)."""

    data: bytes = b""
    mode: str = "ok"
    cut: int = 0
    served: int = 0
    ranges: bool = True       # False: ignore Range, always 200 with the whole file


@dataclass
class FakeServer:
    base: str
    routes: dict[str, Route] = field(default_factory=dict)
    log: list[tuple[str, str | None]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, prefix: str) -> str:
        return f"{self.base}/{prefix}/"

    def requests_for(self, path: str) -> list[str | None]:
        return [rng for p, rng in self.log if p == path]


@pytest.fixture
def http_server():
    lock = threading.Lock()
    state: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            server: FakeServer = state["server"]
            rng = self.headers.get("Range")
            with lock:
                server.log.append((self.path, rng))
                route = server.routes.get(self.path)
                first = route is not None and route.served == 0
                if route is not None:
                    route.served += 1
            if route is None or route.mode == "404":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if route.mode == "hang":
                server.release.wait(30)
                self.close_connection = True
                return
            data, start = route.data, 0
            if route.ranges and rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[len("bytes="):-1])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if route.mode == "drop" and first:
                self.wfile.write(body[:route.cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server = FakeServer(f"http://127.0.0.1:{httpd.server_address[1]}")
    state["server"] = server
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        httpd.shutdown()
        httpd.server_close()


def serve(server: FakeServer, prefix: str, files: dict[str, bytes], mode="ok", **kw):
    for name, data in files.items():
        server.routes[f"/{prefix}/{name}"] = Route(data, mode, **kw)


@pytest.fixture
def fakes():
    """This module (tests import nothing from a conftest under --import-mode=importlib)."""
    import sys

    return sys.modules[__name__]
