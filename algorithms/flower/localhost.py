"""A Flower deployment on one machine: a SuperLink and N SuperNodes on 127.0.0.1 as child
processes, and ``flwr run`` of the pfl-theory app against them — what the deployment test
and the timings of ``docs/flower.md`` use, and a way to try a deployment before spreading
it over machines.

Every process is started in its own session and stopped by its id (its process group:
Flower's SuperLink and SuperNodes start helper processes of their own), ports are chosen
free at run time, the Flower home (``FLWR_HOME``: connection config, installed apps) lives
in the work directory, and nothing leaves 127.0.0.1.  ``fast=True`` starts the SuperNodes
with :mod:`algorithms.flower.supernode` (the ClientApp kept in memory, short idle polls),
``fast=False`` with Flower's stock ``flower-supernode``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from algorithms.flower.local import OFFLINE_ENV

CONNECTION = "pflt-local"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, seconds: float, proc: subprocess.Popen) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} ({proc.args[0]}) exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def app_pyproject(config: dict, hyperparameters: dict | None = None) -> str:
    """The ``pyproject.toml`` of a Flower App running the pfl-theory apps with ``config``
    (``[tool.flwr.app.config]``; strings, numbers and booleans)."""
    def value(v):
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()
    lines = ['[build-system]', 'requires = ["hatchling"]', 'build-backend = "hatchling.build"',
             '', '[project]', 'name = "pflt-flower-app"', 'version = "1.0.0"',
             'description = "pfl-theory algorithms on Flower"', 'license = "MIT"',
             '# pfl-theory is installed from its checkout on every machine: pip install -e ".[flower]"',
             'dependencies = ["flwr[simulation]==1.41.0"]', '',
             '[tool.hatch.build.targets.wheel]', 'packages = ["."]', '',
             '[tool.flwr.app]', 'publisher = "pfl-theory"', '',
             '[tool.flwr.app.components]', 'serverapp = "algorithms.flower.app:server_app"',
             'clientapp = "algorithms.flower.app:client_app"', '', '[tool.flwr.app.config]']
    lines += [f"{k} = {value(v)}" for k, v in config.items()]
    if hyperparameters:
        lines += ['', '[tool.flwr.app.config.hp]']
        lines += [f"{k} = {value(v)}" for k, v in hyperparameters.items()]
    return "\n".join(lines) + "\n"


class LocalDeployment:
    """SuperLink + one SuperNode per client data file, all on 127.0.0.1 (see the module doc).

    Use as a context manager; :meth:`stop` ends every process it started."""

    def __init__(self, workdir: str | Path, data_paths: list[str | Path], *, fast: bool = True,
                 poll: float = 0.1):
        self.workdir = Path(workdir).resolve()
        self.data_paths = [Path(p).resolve() for p in data_paths]
        self.fast, self.poll = fast, poll
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, **OFFLINE_ENV, "FLWR_HOME": str(self.workdir / "flwr-home"),
                    "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1", "PYTHONUNBUFFERED": "1"}

    def __enter__(self) -> "LocalDeployment":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")
        try:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.workdir, start_new_session=True)
        finally:
            log.close()
        self.procs[name] = proc
        return proc

    def start(self) -> None:
        home = self.workdir / "flwr-home"
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        link = self._spawn("superlink", ["flower-superlink", "--insecure", "--port", str(self.port),
                                         "--disable-runtime-dependency-installation"])
        wait_for_port(self.port, 60, link)
        started = [self.start_node(i, wait=False) for i in range(len(self.data_paths))]
        for proc, port in started:
            wait_for_port(port, 60, proc)

    def start_node(self, i: int, *, wait: bool = True) -> tuple[subprocess.Popen, int]:
        """(Re)start the SuperNode of client ``i`` (a restarted one gets a new node id);
        ``(process, its Runtime API port)``, once the port listens if ``wait``."""
        port = free_port()
        if self.fast:
            cmd = [sys.executable, "-m", "algorithms.flower.supernode", "--poll", str(self.poll)]
        else:
            cmd = ["flower-supernode"]
        cmd += ["--insecure", "--superlink", f"127.0.0.1:{self.port}", "--port", str(port),
                "--node-config", f'partition-id={i} data-path="{self.data_paths[i]}"']
        proc = self._spawn(f"supernode{i}", cmd)
        if wait:
            wait_for_port(port, 60, proc)
        return proc, port

    def kill_node(self, i: int) -> None:
        """SIGKILL the SuperNode of client ``i`` and its helpers (a crash, not a shutdown)."""
        self._end(self.procs.pop(f"supernode{i}"), signal.SIGKILL)

    def run(self, app_dir: str | Path, *, timeout: float = 600,
            run_config: str | None = None) -> subprocess.CompletedProcess:
        """``flwr run APP pflt-local --stream`` until the run ends (its output in
        ``workdir/flwr-run.log``); returns the finished process."""
        cmd = ["flwr", "run", str(Path(app_dir).resolve()), CONNECTION, "--stream"]
        if run_config:
            cmd += ["--run-config", run_config]
        proc = self._spawn("flwr-run", cmd)
        try:
            proc.wait(timeout=timeout)
        finally:
            self._end(self.procs.pop("flwr-run"), signal.SIGKILL)
        return subprocess.CompletedProcess(cmd, proc.returncode)

    @staticmethod
    def _end(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        """Stop ``proc`` and its process group (its own id: ``start_new_session``)."""
        for s in (sig, signal.SIGKILL):
            try:
                os.killpg(proc.pid, s)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)      # helpers that outlived the leader
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> None:
        for name in list(self.procs):
            self._end(self.procs.pop(name))
