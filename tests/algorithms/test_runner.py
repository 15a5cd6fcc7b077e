import json

import numpy as np
import pytest
import torch

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import MLR, QuadraticMean
from algorithms.methods.regularized.pfedme import PFedMe
from algorithms.engine.runner import NonFiniteError, run
from synthetic import fedprox
from synthetic.federation import Federation


@pytest.fixture(scope="module")
def fed():
    return fedprox.federation(0.5, 0.5, num_clients=5, dim=8, num_classes=3,
                              size_multiplier=1, seed=0, device="cpu")


def _zero_label_federation():
    xs = [np.random.RandomState(i).randn(30, 8) for i in range(5)]
    return Federation.from_client_arrays(xs, [np.zeros(30, dtype=np.int64)] * 5, num_classes=2,
                                         device="cpu")


def _strip(entries):
    return [{k: v for k, v in e.items() if k != "wall_seconds"} for e in entries]


def test_same_seed_same_history_and_files_written(fed, tmp_path):
    alg = PFedMe(local_rounds=2, inner_steps=2, clients_per_round=3)
    model = MLR(8, 3)
    a = run(alg, fed, model, rounds=4, seed=1, eval_every=2, out_dir=tmp_path, progress=False)
    b = run(alg, fed, model, rounds=4, seed=1, eval_every=2, progress=False)
    c = run(alg, fed, model, rounds=4, seed=2, eval_every=2, progress=False)
    assert _strip(a.history.entries) == _strip(b.history.entries)
    assert _strip(a.history.entries) != _strip(c.history.entries)
    assert [e["round"] for e in a.history.entries] == [2, 4]
    saved = json.loads((tmp_path / "history.json").read_text())
    assert saved["config"]["algorithm"] == "pfedme" and len(saved["entries"]) == 2
    entry = saved["entries"][-1]
    for key in ("round", "personalized_accuracy", "global_accuracy", "local_accuracy",
                "personalized_accuracy_low5", "personalized_client_accuracy"):
        assert key in entry
    assert len(entry["personalized_client_accuracy"]) == 5
    header = (tmp_path / "history.csv").read_text().splitlines()[0].split(",")
    assert "personalized_accuracy" in header and "personalized_client_accuracy" not in header


def test_divergence_stops_with_round_and_keeps_history(fed, tmp_path):
    # lr = 3 on ½‖θ − x‖²: θ ← −2θ + 3x doubles |θ| per step -> float32 overflow by round ~7
    alg = FedAvg(lr=3.0, local_rounds=20, clients_per_round=5)
    with pytest.raises(NonFiniteError) as err:
        run(alg, _zero_label_federation(), QuadraticMean(8), rounds=20, out_dir=tmp_path,
            progress=False)
    assert 2 <= err.value.round < 20 and f"round {err.value.round}" in str(err.value)
    saved = json.loads((tmp_path / "history.json").read_text())
    # a loss-based stop keeps the offending evaluation; a non-finite state has none
    kept = err.value.round + (1 if "_loss of model" in str(err.value) else 0)
    assert [e["round"] for e in saved["entries"]] == list(range(1, kept))


def test_state_round_counter_and_resume_from_state(fed):
    alg = FedAvg(local_rounds=2, clients_per_round=2)
    model = MLR(8, 3)
    full = run(alg, fed, model, rounds=4, seed=3, progress=False)
    half = run(alg, fed, model, rounds=2, seed=3, progress=False)
    rest = run(alg, fed, model, rounds=4, seed=3, progress=False, state=half.state)
    assert full.state.round == 4
    for k in full.state.models["global"]:
        assert torch.equal(full.state.models["global"][k], rest.state.models["global"][k])


def test_bad_arguments(fed):
    with pytest.raises(ValueError):
        run(FedAvg(clients_per_round=2), fed, MLR(8, 3), rounds=0, progress=False)
    with pytest.raises(ValueError):
        run(FedAvg(clients_per_round=2), fed, MLR(8, 3), rounds=1, eval_every=0, progress=False)


# ---- the history files: appended per evaluation, history.json in full at a few points --

def _json_writes(monkeypatch):
    import algorithms.engine.runner as runner

    writes = []
    atomic = runner._atomic_write
    monkeypatch.setattr(runner, "_atomic_write",
                        lambda path, text: (writes.append(path.name), atomic(path, text))[1])
    return writes


def test_an_evaluation_appends_one_line_whatever_came_before(fed, tmp_path, monkeypatch):
    # the files are written in full a fixed number of times (before round 1, at the first
    # entry, at the end) however many evaluations there are; each evaluation appends a line
    alg, model = FedAvg(local_rounds=1, clients_per_round=2), MLR(8, 3)
    counts = []
    for rounds in (3, 9):
        writes = _json_writes(monkeypatch)
        res = run(alg, fed, model, rounds=rounds, out_dir=tmp_path / str(rounds), progress=False)
        monkeypatch.undo()
        counts.append(writes.count("history.json"))
        out = tmp_path / str(rounds)
        assert len((out / "history.jsonl").read_text().splitlines()) == rounds
        assert len((out / "history.csv").read_text().splitlines()) == rounds + 1
        saved = json.loads((out / "history.json").read_text())
        assert saved["entries"] == json.loads(json.dumps(res.history.entries))
    assert counts == [3, 3]


def test_history_json_is_rewritten_at_checkpoints(fed, tmp_path, monkeypatch):
    writes = _json_writes(monkeypatch)
    run(FedAvg(local_rounds=1, clients_per_round=2), fed, MLR(8, 3), rounds=6, out_dir=tmp_path,
        progress=False, checkpoint_every=2)
    # before round 1, first entry (round 1), checkpoints at rounds 2, 4, 6 (the end: same)
    assert writes.count("history.json") == 5


def test_read_history_takes_the_appended_lines_and_drops_a_cut_last_line(fed, tmp_path):
    from algorithms.engine.runner import read_history

    run(FedAvg(local_rounds=1, clients_per_round=2), fed, MLR(8, 3), rounds=4,
        out_dir=tmp_path, progress=False, checkpoint_every=2)
    lines = (tmp_path / "history.jsonl").read_text()
    # a run killed after round 3's line and in the middle of round 4's, history.json at
    # its round-2 checkpoint
    data = json.loads((tmp_path / "history.json").read_text())
    data["entries"] = data["entries"][:2]
    (tmp_path / "history.json").write_text(json.dumps(data))
    cut = lines.splitlines(keepends=True)
    (tmp_path / "history.jsonl").write_text("".join(cut[:3]) + cut[3][:40])
    assert [e["round"] for e in read_history(tmp_path)["entries"]] == [1, 2, 3]
    (tmp_path / "history.jsonl").write_text(cut[0][:40] + "\n" + "".join(cut[1:]))
    with pytest.raises(ValueError, match="history.jsonl: line 1: not valid JSON"):
        read_history(tmp_path)
    (tmp_path / "history.jsonl").unlink()             # a directory written before jsonl
    assert [e["round"] for e in read_history(tmp_path)["entries"]] == [1, 2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_all_finite_sees_a_bad_value_at_every_position(bad, dtype):
    from algorithms.engine.runner import all_finite

    for n in (1, 7, 16, 33, 257):
        for pos in range(n):
            v = torch.linspace(-3, 3, n, dtype=dtype)
            assert all_finite(v) and all_finite(v.view(1, n).expand(3, n))
            v[pos] = bad
            assert not all_finite(v), (n, pos)
            assert not all_finite(v.view(1, n).expand(3, n).t())     # non-contiguous
    assert all_finite(torch.empty(0, 3))


def test_non_finite_model_names_the_model_or_tensor():
    from algorithms.engine.base import State
    from algorithms.engine.runner import non_finite_model

    ok = {"w": torch.zeros(4, 3)}
    state = State(1, 0, {"global": ok, "local": {"w": torch.zeros(4, 3)}},
                  {"labels": torch.zeros(4, dtype=torch.long), "scores": torch.zeros(4)})
    assert non_finite_model(state) is None
    state.models["local"]["w"][2, 1] = -float("inf")
    assert non_finite_model(state) == "local"
    state.models["local"]["w"][2, 1] = 0.0
    state.tensors["scores"][3] = float("nan")
    assert non_finite_model(state) == "scores"


@pytest.mark.parametrize("env, given, expected", [
    (None, None, 1),        # the CLI's default: one thread
    ("2", None, 2),         # PFLT_THREADS honoured by the API as by `pflt run`
    ("2", 3, 3),            # threads= wins over the environment
])
def test_run_applies_the_cli_threads_policy_and_restores_torch(fed, monkeypatch, env, given,
                                                                expected):
    if env is None:
        monkeypatch.delenv("PFLT_THREADS", raising=False)
    else:
        monkeypatch.setenv("PFLT_THREADS", env)
    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(4)        # a caller's own setting: used nowhere inside run()
    try:
        run(FedAvg(clients_per_round=2), fed, MLR(8, 3), rounds=2, progress=False,
            threads=given, on_round=lambda s: seen.append(torch.get_num_threads()))
        assert seen == [expected, expected]
        assert torch.get_num_threads() == 4      # restored after the run
    finally:
        torch.set_num_threads(before)


def test_run_rejects_a_bad_thread_count(fed, monkeypatch):
    with pytest.raises(ValueError, match="threads"):
        run(FedAvg(clients_per_round=2), fed, MLR(8, 3), rounds=1, progress=False, threads=0)
    monkeypatch.setenv("PFLT_THREADS", "zero")
    with pytest.raises(ValueError, match="PFLT_THREADS"):
        run(FedAvg(clients_per_round=2), fed, MLR(8, 3), rounds=1, progress=False)
