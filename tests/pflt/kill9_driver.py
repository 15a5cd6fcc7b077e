"""Driver of the kill -9 tests (tests/pflt/test_kill9.py): ONE process per algorithm.

``python tests/pflt/kill9_driver.py ALGORITHM WORKDIR ROUNDS SEED [ARGS...]`` imports the
package once, then forks one child per attempt of ``pflt run`` on ``WORKDIR/killed``; each
child is killed with SIGKILL at a moment drawn from ``random.Random(SEED)``:

1. ``round``: inside round r of the fresh run (the round computed, its evaluation and
   checkpoint not written);
2. ``checkpoint``: during the checkpoint write of round r (a part of its bytes written to
   the temporary file, then SIGKILL — the ``.checkpoint.pt.*.tmp`` a kill leaves);
3. ``resume``: during the resume itself (after the checkpoint and history were read and
   checked, at the k-th write of the resumed run's history files);
4. ``timer``: by the driver, after a random delay (any moment at all);

then ``--resume`` until the run completes.  Only then does the driver run the
uninterrupted reference on ``WORKDIR/reference`` (so that no computation precedes a
fork).  It prints one JSON line: the attempts (plan, exit status or signal).  The test
compares the two directories.  Forking after ``import torch`` is safe here: the parent
computes nothing before its last fork and every run uses one thread.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(plan: dict) -> None:
    """Install the kill of ``plan`` in this (child) process."""
    import algorithms.engine.runner as runner
    import pfl_theory.safe_files as safe_files

    if plan["at"] == "round":
        real = runner._play_round

        def play(algorithm, state, *args, **kwargs):
            new = real(algorithm, state, *args, **kwargs)
            if new.round == plan["round"]:
                _die()
            return new
        runner._play_round = play
    elif plan["at"] == "checkpoint":
        real_write = safe_files._FdWriter.write
        seen = {"bytes": 0}

        def write(self, data):
            if Path(self.name).name == "checkpoint.pt" and plan["armed"]():
                cut = max(1, int(len(data) * plan["fraction"]))
                seen["bytes"] += real_write(self, bytes(data)[:cut])
                _die()
            return real_write(self, data)
        import algorithms.engine.checkpoint as checkpoint
        real_save = checkpoint.save_checkpoint
        rounds = {"now": -1}

        def save(path, state, *args, **kwargs):
            rounds["now"] = state.round
            return real_save(path, state, *args, **kwargs)
        checkpoint.save_checkpoint = save
        runner.save_checkpoint = save
        plan["armed"] = lambda: rounds["now"] == plan["round"]
        safe_files._FdWriter.write = write
    elif plan["at"] == "resume":
        real_atomic = runner._atomic_write
        calls = {"n": 0}

        def atomic(path, text):
            calls["n"] += 1
            if calls["n"] == plan["write"]:
                _die()
            return real_atomic(path, text)
        runner._atomic_write = atomic


def _child(argv: list[str], plan: dict | None, log: Path) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    code = 3
    try:
        if plan is not None:
            _arm(plan)
        from pflt.cli import main
        code = main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def attempt(argv: list[str], plan: dict | None, log: Path, delay: float | None = None) -> dict:
    """Fork a child running ``pflt`` with ``argv`` under ``plan``; its outcome."""
    pid = os.fork()
    if pid == 0:
        _child(argv, plan, log)
    if delay is not None:
        end = time.monotonic() + delay
        while time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
    else:
        _, status = os.waitpid(pid, 0)
    outcome = {"plan": {k: v for k, v in (plan or {}).items() if k != "armed"}}
    if os.WIFSIGNALED(status):
        outcome["signal"] = os.WTERMSIG(status)
    else:
        outcome["exit"] = os.WEXITSTATUS(status)
    return outcome


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # this checkout's package
    name, work, rounds, seed, *extra = sys.argv[1:]
    rounds, seed, work = int(rounds), int(seed), Path(work)
    import torch  # noqa: F401  (imported before the forks: each child starts warm)
    import pflt.cli  # noqa: F401
    import pflt.commands.run  # noqa: F401
    from algorithms.engine.base import registry
    registry()

    rng = random.Random(f"{name}-{seed}")
    killed, log = work / "killed", work / "children.log"
    base = ["run", "--algorithm", name, "--rounds", str(rounds), "--checkpoint-every", "1",
            "--threads", "1", "--no-progress", *extra]
    fresh = [*base, "--out", str(killed)]
    resume = ["run", "--resume", str(killed), "--no-progress", "--threads", "1"]
    first = rng.randint(1, max(1, rounds // 3))
    later = rng.randint(first, rounds)
    plans = [({"at": "round", "round": first}, fresh),
             ({"at": "checkpoint", "round": later, "fraction": rng.uniform(0.05, 0.95)}, resume),
             ({"at": "resume", "write": rng.randint(1, 2)}, resume)]
    outcomes = [attempt(argv, plan, log) for plan, argv in plans]
    outcomes.append(attempt(resume, {"at": "timer"}, log, delay=rng.uniform(0.5, 4.0)))
    for _ in range(3):            # to completion (the last attempt may have finished it)
        if (killed / "summary.json").is_file():
            break
        outcomes.append(attempt(resume, None, log))
    outcomes.append(attempt([*base, "--out", str(work / "reference")], None, log))
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
