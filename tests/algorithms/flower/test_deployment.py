"""A real Flower deployment on 127.0.0.1: a SuperLink and three SuperNodes as separate
processes (:class:`algorithms.flower.localhost.LocalDeployment`, SuperNodes of
:mod:`algorithms.flower.supernode`), ``flwr run`` of ``algorithms.flower.app``.

* no one killed: ``state.pt`` equals the in-process batched engine (pFedMe, CGPFL —
  CGPFL's K context models and assignment live on the server);
* pFedMe with SuperNodes 1 and 2 killed (SIGKILL) in round 2 and SuperNode 2 restarted at
  once (a new node id, the same ``partition-id``): the run finishes, ``state.pt``,
  ``history.json`` and ``outcome.json`` are written, client 1 is recorded as failed and
  its rows are NaN, client 2 rejoins (recorded) and has rows again; ``flwr run`` exits 0
  (it always does) and ``pflt flower-outcome`` exits 1.

Time: the two equality runs are submitted together (their start-up overlaps); see the
module's measured durations in docs/flower.md.  Every process is stopped by its id in ``finally``
(``LocalDeployment.stop``); ports are chosen free at run time.
"""

import json
import shutil
import time

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="Flower tests need the optional extra 'flower'")
if shutil.which("flower-superlink") is None or shutil.which("flwr") is None:
    pytest.skip("Flower's command-line tools (flower-superlink, flwr) are not on PATH",
                allow_module_level=True)

from algorithms.engine.base import get_algorithm  # noqa: E402
from algorithms.flower.localhost import LocalDeployment, app_pyproject  # noqa: E402
from algorithms.engine.models import build_model  # noqa: E402
from algorithms.engine.runner import run  # noqa: E402
from pflt.cli import main  # noqa: E402
from synthetic.federation import Federation  # noqa: E402

SEED, N = 3, 3
# the same code on the same draws; only batched (N rows) vs one-client kernels may round
# differently in float64 (~1e-16 relative per op, a few dozen ops) -> 1e-12
ATOL = 1e-12
PFEDME = dict(clients_per_round=3, local_rounds=3, batch_size=4, inner_steps=2)
CGPFL = dict(num_contexts=2, local_rounds=2, batch_size=4, inner_steps=2)


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.RandomState(1)
    ys = [rng.randint(0, 3, n) for n in (24, 31, 27)]                  # ragged clients
    centres = rng.randn(3, 4)
    xs = [centres[y] + rng.randn(len(y), 4) for y in ys]
    return xs, ys


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, arrays):
    work = tmp_path_factory.mktemp("deployment")
    paths = []
    for i, (x, y) in enumerate(zip(*arrays)):
        paths.append(work / f"client{i}.npz")
        np.savez(paths[-1], x=x, y=y)
    dep = LocalDeployment(work, paths)
    try:
        dep.start()
        yield dep
    finally:
        dep.stop()


def launch(dep, name, algorithm, hps, rounds, **config):
    app = dep.workdir / name
    app.mkdir()
    out = dep.workdir / f"{name}-out"
    cfg = {"algorithm": algorithm, "num-clients": N, "rounds": rounds, "seed": SEED,
           "model": "mlr", "num-classes": 3, "dtype": "float64", "out-dir": str(out),
           "timeout": 60.0, **config}
    (app / "pyproject.toml").write_text(app_pyproject(cfg, hps))
    return app, out


def engine_state(arrays, algorithm, hps, rounds):
    fed = Federation.from_client_arrays(*arrays, num_classes=3, seed=SEED, device="cpu",
                                        dtype=torch.float64)
    alg = get_algorithm(algorithm)(**hps)
    return run(alg, fed, build_model("mlr", fed), rounds=rounds, seed=SEED,
               eval_every=rounds, progress=False).state


def outcome_exit(out, capsys):
    """``pflt flower-outcome OUT``: (exit status, printed line)."""
    capsys.readouterr()
    code = main(["flower-outcome", str(out)])
    return code, capsys.readouterr().out


EQUAL = {"pfedme": PFEDME, "cgpfl": CGPFL}


@pytest.fixture(scope="module")
def equality_runs(deployment):
    """Both runs submitted at once (the SuperLink runs them side by side: their start-up
    costs overlap); every flwr process stopped by its id."""
    outs, procs = {}, {}
    try:
        for algorithm, hps in EQUAL.items():
            app, outs[algorithm] = launch(deployment, f"eq-{algorithm}", algorithm, hps,
                                          rounds=2, **{"eval-every": 2})
            procs[algorithm] = deployment._spawn(f"flwr-run-{algorithm}",
                                                 ["flwr", "run", str(app), "pflt-local", "--stream"])
        codes = {a: p.wait(timeout=240) for a, p in procs.items()}
    finally:
        for algorithm in procs:
            deployment._end(deployment.procs.pop(f"flwr-run-{algorithm}"))
    return outs, codes


@pytest.mark.parametrize("algorithm", sorted(EQUAL))
def test_deployment_equals_engine(equality_runs, arrays, algorithm, capsys):
    outs, codes = equality_runs
    out, hps = outs[algorithm], EQUAL[algorithm]
    assert codes[algorithm] == 0
    got = torch.load(out / "state.pt", weights_only=True)
    want = engine_state(arrays, algorithm, hps, 2)
    assert got["round"] == 2 and sorted(got["models"]) == sorted(want.models)
    for m, params in want.models.items():
        for k, v in params.items():
            torch.testing.assert_close(got["models"][m][k], v, rtol=0, atol=ATOL, msg=f"{m}/{k}")
    for k, v in want.tensors.items():
        torch.testing.assert_close(got["tensors"][k], v, rtol=0, atol=ATOL, msg=k)
    assert json.loads((out / "outcome.json").read_text())["status"] == "completed"
    assert json.loads((out / "history.json").read_text())["failures"] == []
    assert outcome_exit(out, capsys)[0] == 0


def train_messages(dep, i):
    log = dep.workdir / f"supernode{i}.log"
    return log.read_text(errors="replace").count("Receiving: train") if log.exists() else 0


def test_killed_supernodes_run_finishes_and_a_restarted_one_rejoins(deployment, capsys):
    rounds = 8
    app, out = launch(deployment, "kill", "pfedme", PFEDME, rounds=rounds,
                      **{"eval-every": 1, "timeout": 5.0})
    before = {i: train_messages(deployment, i) for i in (1, 2)}   # from the runs before
    proc = deployment._spawn("flwr-run", ["flwr", "run", str(app), "pflt-local", "--stream"])
    try:
        end = time.monotonic() + 120
        while min(train_messages(deployment, i) - before[i] for i in (1, 2)) < 2:
            assert time.monotonic() < end and proc.poll() is None, "round 2 never reached"
            time.sleep(0.05)
        deployment.kill_node(1)
        deployment.kill_node(2)
        deployment.start_node(2)                # new node id, same partition-id
        assert proc.wait(timeout=180) == 0      # flwr run exits 0 whatever the outcome
    finally:
        deployment._end(deployment.procs.pop("flwr-run"))
    outcome = json.loads((out / "outcome.json").read_text())
    assert outcome["status"] == "completed-with-failures" and outcome["round"] == rounds
    assert outcome["clients_left_out"] == [1, 2] and outcome["clients_missing_at_end"] == [1]
    failures = json.loads((out / "history.json").read_text())["failures"]
    assert any(f["phase"] == "train" and 1 in f["clients"] for f in failures)
    rejoined = [f for f in failures if f["phase"] == "rejoin"]
    assert [f["clients"] for f in rejoined] == [[2]], failures
    state = torch.load(out / "state.pt", weights_only=True)
    assert state["round"] == rounds
    for name in ("personalized", "local"):
        for v in state["models"][name].values():
            assert torch.isnan(v[1]).all()                              # lost: NaN, recorded
            assert torch.isfinite(v[0]).all() and torch.isfinite(v[2]).all()
    assert all(torch.isfinite(v).all() for v in state["models"]["global"].values())
    code, line = outcome_exit(out, capsys)
    assert code == 1 and line.startswith("completed-with-failures")
