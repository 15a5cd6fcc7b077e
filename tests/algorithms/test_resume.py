"""Kill and resume, for every registered algorithm: a run killed after round k and resumed
from its checkpoint (:func:`algorithms.engine.resume.resume_point`, what ``pflt run --resume``
uses) ends with the same state, bit for bit, and the same history files as the run that
was never interrupted — at every round k, PPFE's stage transitions and CGPFL-Heur's
K-selection round included.  The registry is read at collection time, so an algorithm
added later is covered without editing this file."""

import csv
import json

import pytest
import torch

from algorithms.engine.base import hyperparameters, registry
from algorithms.engine.checkpoint import CheckpointError, load_checkpoint
from algorithms.engine.models import DNN, MLR
from algorithms.engine.resume import ResumeError, resume_point
from algorithms.engine.runner import run, run_config
from synthetic.federation import Federation

T = 6                       # rounds of every run
SEED = 3
CONFIG = {"data": {"name": "planted", "seed": 0}, "data_seed": 0}
#: cheap settings; only fields an algorithm has are used
SMALL = {"local_rounds": 2, "inner_steps": 2, "batch_size": 10, "clients_per_round": 4,
         "lr": 0.03, "personal_lr": 0.05, "head_steps": 2, "finetune_steps": 2}
#: settings that put an algorithm's own transitions inside the T rounds
TRANSITIONS = {"ppfe": {"stages": 3, "total_rounds": T, "stage_fractions": "1,1,1"},
               "cgpfl-heur": {"select_round": 2}}


def build(name):
    cls = registry()[name]
    names = {f.name for f in hyperparameters(cls)}
    return cls(**{k: v for k, v in {**SMALL, **TRANSITIONS.get(name, {})}.items() if k in names})


@pytest.fixture(scope="module")
def fed():
    """6 clients of 40 samples (3 Gaussian classes in 5-d), float64."""
    gen = torch.Generator().manual_seed(0)
    means = 3.0 * torch.eye(3, 5, dtype=torch.float64)
    ys = [torch.randint(0, 3, (40,), generator=gen) for _ in range(6)]
    xs = [means[y] + 0.5 * torch.randn(40, 5, generator=gen, dtype=torch.float64) for y in ys]
    return Federation.from_client_arrays([x.numpy() for x in xs], [y.numpy() for y in ys],
                                         num_classes=3, device="cpu", dtype=torch.float64)


class _Killed(BaseException):
    """What a kill looks like to the code after it: nothing more runs."""


def _kill_at(k):
    def on_round(state):
        if state.round == k:
            raise _Killed
    return on_round


def _straight(alg, fed, model, out, every=1):
    return run(alg, fed, model, rounds=T, seed=SEED, out_dir=out, progress=False,
               checkpoint_every=every, config=CONFIG)


def _killed_and_resumed(alg, fed, model, out, k, every=1):
    with pytest.raises(_Killed):
        run(alg, fed, model, rounds=T, seed=SEED, out_dir=out, progress=False,
            checkpoint_every=every, config=CONFIG, on_round=_kill_at(k))
    cfg = run_config(alg, fed, model, rounds=T, seed=SEED, eval_every=1, config=CONFIG)
    point = resume_point(out, alg, fed, model, seed=SEED, config=cfg)
    assert point is not None and point[0].round == k - (k % every)
    return run(alg, fed, model, rounds=T, seed=SEED, out_dir=out, progress=False,
               checkpoint_every=every, config=CONFIG, state=point[0], history=point[1])


def _no_wall(rows):
    return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rows]


def assert_same_run(a_dir, b_dir, a_state, b_state):
    """Same state (every tensor bit for bit, the same names) and the same history files."""
    for x, y in ((a_state, b_state), (load_checkpoint(a_dir / "checkpoint.pt"),
                                      load_checkpoint(b_dir / "checkpoint.pt"))):
        assert x.round == y.round == T
        assert sorted(x.models) == sorted(y.models) and sorted(x.tensors) == sorted(y.tensors)
        for m in x.models:
            assert sorted(x.models[m]) == sorted(y.models[m])
            for p in x.models[m]:
                assert x.models[m][p].dtype == y.models[m][p].dtype
                assert torch.equal(x.models[m][p], y.models[m][p]), f"{m}.{p} differs"
        for name in x.tensors:
            assert torch.equal(x.tensors[name], y.tensors[name]), f"tensor {name} differs"
    lines = [[json.loads(s) for s in (d / "history.jsonl").read_text().splitlines()]
             for d in (a_dir, b_dir)]
    assert _no_wall(lines[0]) == _no_wall(lines[1])
    assert [e["round"] for e in lines[1]] == list(range(1, T + 1))
    whole = [json.loads((d / "history.json").read_text()) for d in (a_dir, b_dir)]
    assert _no_wall(whole[0]["entries"]) == _no_wall(whole[1]["entries"])
    assert whole[0]["initial_evaluation"] == whole[1]["initial_evaluation"]
    assert whole[0]["config"] == whole[1]["config"]
    rows = [_no_wall(csv.DictReader(open(d / "history.csv"))) for d in (a_dir, b_dir)]
    assert rows[0] == rows[1]


ALGORITHMS = sorted(registry())
#: PPFE's stages here are rounds 1-2, 3-4, 5-6 (a transition at the start of rounds 3
#: and 5); CGPFL-Heur picks K in round 3 (select_round 2, 0-based): killed after round 2
#: (before a transition), 3 (just after one) and 5 (after the second)
KILLS = (2, 3, 5)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_killed_and_resumed_runs_are_bit_identical(name, fed, tmp_path):
    alg, model = build(name), DNN(5, 3, hidden=8)
    full = _straight(alg, fed, model, tmp_path / "full")
    for k in KILLS:
        part = _killed_and_resumed(alg, fed, model, tmp_path / f"k{k}", k)
        assert_same_run(tmp_path / "full", tmp_path / f"k{k}", full.state, part.state)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALGORITHMS)
def test_killed_at_every_round_resumes_bit_identically(name, fed, tmp_path):
    alg, model = build(name), DNN(5, 3, hidden=8)
    full = _straight(alg, fed, model, tmp_path / "full")
    for k in range(1, T):
        part = _killed_and_resumed(alg, fed, model, tmp_path / f"k{k}", k)
        assert_same_run(tmp_path / "full", tmp_path / f"k{k}", full.state, part.state)


@pytest.mark.parametrize("name", ["ppfe", "cgpfl-heur", "pfedme"])
def test_killed_between_checkpoints_resumes_bit_identically(name, fed, tmp_path):
    """Checkpoints every 2 rounds, killed after an odd round: the history has one round
    more than the checkpoint; it is dropped and played again."""
    alg, model = build(name), DNN(5, 3, hidden=8)
    full = _straight(alg, fed, model, tmp_path / "full", every=2)
    for k in (3, 5):
        part = _killed_and_resumed(alg, fed, model, tmp_path / f"k{k}", k, every=2)
        assert_same_run(tmp_path / "full", tmp_path / f"k{k}", full.state, part.state)


def test_ppfe_with_mlr_resumes_after_its_stage_transition(fed, tmp_path):
    """MLR has one layer: two stages; the transition is in round 4 of 6 here."""
    alg = registry()["ppfe"](stages=2, total_rounds=T, stage_fractions="1,1", local_rounds=2,
                             head_steps=2, clients_per_round=4)
    model = MLR(5, 3)
    full = _straight(alg, fed, model, tmp_path / "full")
    for k in (3, 4, 5):
        part = _killed_and_resumed(alg, fed, model, tmp_path / f"k{k}", k)
        assert_same_run(tmp_path / "full", tmp_path / f"k{k}", full.state, part.state)
    assert "stage0" in full.state.models


def test_ppfe_checkpoint_of_another_stage_is_refused(fed, tmp_path):
    """The layout check knows the stage of each round: a stage-1 checkpoint relabelled as
    a stage-0 round (digest rewritten, as a deliberate editor would) is refused."""
    from algorithms.engine.checkpoint import _digest
    alg, model = build("ppfe"), DNN(5, 3, hidden=8)
    _straight(alg, fed, model, tmp_path / "r")
    path = tmp_path / "r" / "checkpoint.pt"
    payload = torch.load(path, weights_only=True)
    payload["round"] = 1
    payload["digests"]["round"] = _digest(1)
    torch.save(payload, path)
    cfg = run_config(alg, fed, model, rounds=T, seed=SEED, eval_every=1, config=CONFIG)
    with pytest.raises(CheckpointError, match="holds models"):
        resume_point(tmp_path / "r", alg, fed, model, seed=SEED, config=cfg)


def test_history_with_rounds_missing_is_refused_not_rewritten(fed, tmp_path):
    alg, model = build("fedavg"), DNN(5, 3, hidden=8)
    with pytest.raises(_Killed):
        run(alg, fed, model, rounds=T, seed=SEED, out_dir=tmp_path, progress=False,
            checkpoint_every=1, config=CONFIG, on_round=_kill_at(4))
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    (tmp_path / "history.jsonl").write_text("\n".join(lines[:2]) + "\n")   # rounds 1-2 left
    (tmp_path / "history.json").unlink()
    before = (tmp_path / "history.jsonl").read_bytes()
    cfg = run_config(alg, fed, model, rounds=T, seed=SEED, eval_every=1, config=CONFIG)
    with pytest.raises(ResumeError, match="lacks the evaluations of rounds 3, 4"):
        resume_point(tmp_path, alg, fed, model, seed=SEED, config=cfg)
    assert (tmp_path / "history.jsonl").read_bytes() == before


def test_missing_history_json_is_rebuilt_from_the_lines(fed, tmp_path):
    """history.json deleted: the resumed run keeps rounds 1-4 of history.jsonl (it used to
    start history.jsonl afresh and lose them) and ends equal to the uninterrupted run."""
    alg, model = build("pfedme"), DNN(5, 3, hidden=8)
    full = _straight(alg, fed, model, tmp_path / "full")
    out = tmp_path / "part"
    with pytest.raises(_Killed):
        run(alg, fed, model, rounds=T, seed=SEED, out_dir=out, progress=False,
            checkpoint_every=1, config=CONFIG, on_round=_kill_at(4))
    (out / "history.json").unlink()
    cfg = run_config(alg, fed, model, rounds=T, seed=SEED, eval_every=1, config=CONFIG)
    state, history = resume_point(out, alg, fed, model, seed=SEED, config=cfg)
    assert [e["round"] for e in history.entries] == [1, 2, 3, 4]
    part = run(alg, fed, model, rounds=T, seed=SEED, out_dir=out, progress=False,
               checkpoint_every=1, config=CONFIG, state=state, history=history)
    assert_same_run(tmp_path / "full", out, full.state, part.state)
