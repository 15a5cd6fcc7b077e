"""The in-memory-ClientApp SuperNode launcher (algorithms.flower.supernode) and the
localhost deployment helpers (algorithms.flower.localhost), without starting Flower
(the real processes run in test_deployment.py)."""

import io
import socket
import time
import tomllib
import zipfile

import pytest

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower'")

from algorithms.flower import supernode  # noqa: E402
from algorithms.flower.localhost import app_pyproject, free_port  # noqa: E402


def fab(text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("pyproject.toml", text)
    return buf.getvalue()


def test_fab_clientapp_reads_the_component():
    text = app_pyproject({"algorithm": "pfedme", "num-clients": 2, "rounds": 1})
    assert supernode.fab_clientapp(fab(text)) == supernode.APP_REF
    other = text.replace(supernode.APP_REF, "someone.else:app")
    assert supernode.fab_clientapp(fab(other)) == "someone.else:app"


def test_fast_poll_shortens_the_supernode_waits(monkeypatch):
    import flwr.supernode.start_client_internal as loop
    monkeypatch.setattr(loop, "time", loop.time)
    monkeypatch.setattr(loop, "pull_objects", loop.pull_objects)
    supernode.fast_poll(0.01)
    t = time.monotonic()
    loop.time.sleep(3)                    # the SuperNode's idle wait
    assert time.monotonic() - t < 1.0
    assert loop.time.monotonic() > 0      # the rest of the time module is untouched
    assert loop.pull_objects.keywords == {"initial_backoff": 0.01, "backoff_cap": 1.0}


@pytest.mark.parametrize("argv, message", [
    (["--poll", "0"], "--poll must be in (0, 3]"),
    (["--poll", "5"], "--poll must be in (0, 3]"),
    (["--isolation", "subprocess"], "own executor"),
])
def test_launcher_refuses_in_one_line(argv, message):
    with pytest.raises(SystemExit) as exc:
        supernode.main(argv)
    assert message in str(exc.value) and str(exc.value).startswith("pflt supernode: error:")


def test_app_pyproject_is_a_valid_flower_app(tmp_path):
    from flwr.cli.config_utils import load_and_validate
    (tmp_path / "pyproject.toml").write_text(app_pyproject(
        {"algorithm": "cgpfl", "num-clients": 3, "rounds": 2, "out-dir": "/x", "timeout": 5.0,
         "resume": False}, {"num_contexts": 2}))
    config, _warnings = load_and_validate(tmp_path / "pyproject.toml")
    assert config is not None
    flwr_cfg = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert flwr_cfg["config"]["num-clients"] == 3 and flwr_cfg["config"]["resume"] is False
    assert flwr_cfg["config"]["hp"] == {"num_contexts": 2}
    assert flwr_cfg["components"]["clientapp"] == supernode.APP_REF


def test_free_port_is_free():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_task_heartbeats_while_running_and_stop_after():
    import threading

    class Client:
        beats = 0

        def SendTaskHeartbeat(self, request):
            Client.beats += 1

    done = threading.Event()
    beat = threading.Thread(target=supernode._heartbeats, args=(Client(), done, 0.02))
    beat.start()
    end = time.monotonic() + 10
    while Client.beats < 3 and time.monotonic() < end:
        time.sleep(0.01)
    done.set()
    beat.join(timeout=5)
    assert Client.beats >= 3 and not beat.is_alive()


@pytest.mark.slow
def test_the_launcher_stops_within_5_s_of_sigterm():
    """Issue 36: ``python -m algorithms.flower.supernode`` took 8–11 s after SIGTERM (Flower's
    shutdown, then the interpreter's finalization); now Flower's graceful exit runs and the
    process ends (measured 0.3 s). The SuperLink is absent: the node keeps retrying."""
    import signal
    import subprocess
    import sys
    import threading

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "algorithms.flower.supernode", "--insecure",
                             "--superlink", f"127.0.0.1:{port}", "--port", str(free_port())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = threading.Event()

    def watch():
        for line in proc.stderr:
            if "SIGTERM or SIGINT stops this node" in line:   # Flower's handlers installed
                started.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        assert started.wait(180), "the SuperNode did not start"
        proc.send_signal(signal.SIGTERM)
        t = time.monotonic()
        proc.wait(30)
        assert time.monotonic() - t < 5.0
        # 0: Flower's graceful exit finished; 143: it took longer than 3 s and the timer
        # ended the process (under load); -15 would be SIGTERM before the handler was set
        assert proc.returncode in (0, 128 + signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
