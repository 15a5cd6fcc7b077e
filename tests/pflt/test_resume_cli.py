"""``pflt run --resume`` across PPFE's stage transitions, and ``--out``/``--overwrite``."""

import json

import torch

from pflt.cli import main

TINY = ["--clients", "4", "--max-client-size", "30", "--no-progress"]
PPFE = ["--algorithm", "ppfe", "--model", "mlp", "--hidden", "6,4", "--stages", "3",
        "--total-rounds", "6", "--stage-fractions", "1,1,1", "--local-rounds", "1",
        "--head-steps", "1", "--clients-per-round", "2", "--checkpoint-every", "1", *TINY]


def _entries(out):
    return [{k: v for k, v in e.items() if k != "wall_seconds"}
            for e in json.loads((out / "history.json").read_text())["entries"]]


def test_ppfe_resumes_across_its_stage_transitions(tmp_path):
    """The issue's command, scaled down: killed after round 3 (stage 1 of 3; the checkpoint
    holds stage 0's networks and a split body), resumed to round 6 through stage 2: equal
    to the uninterrupted run, bit for bit.  (It used to fail: "model 'body' has
    parameters …".)"""
    full, part = tmp_path / "full", tmp_path / "part"
    assert main(["run", *PPFE, "--rounds", "6", "--out", str(full)]) == 0
    assert main(["run", *PPFE, "--rounds", "3", "--out", str(part)]) == 0
    assert "stage0" in torch.load(part / "checkpoint.pt", weights_only=True)["models"]
    assert main(["run", "--resume", str(part), "--rounds", "6", "--no-progress"]) == 0
    a, b = (torch.load(d / "checkpoint.pt", weights_only=True) for d in (full, part))
    assert sorted(a["models"]) == sorted(b["models"]) == ["body", "heads", "stage0", "stage1"]
    for m in a["models"]:
        for k in a["models"][m]:
            assert torch.equal(a["models"][m][k], b["models"][m][k])
    assert _entries(full) == _entries(part)


def test_out_holding_another_run_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "o"
    pfedme = ["--local-rounds", "1", "--inner-steps", "1", "--clients-per-round", "2"]
    assert main(["run", "--out", str(out), "--rounds", "1", "--checkpoint-every", "1",
                 *TINY, *pfedme]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    fedavg = ["--algorithm", "fedavg", "--local-rounds", "1", "--clients-per-round", "2"]
    assert main(["run", "--out", str(out), "--rounds", "1", *TINY, *fedavg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds another run (algorithm" in err[0] and "--overwrite" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(["run", "--out", str(out), "--rounds", "1", "--overwrite", *TINY, *fedavg]) == 0
    assert not (out / "checkpoint.pt").exists()       # pFedMe's: gone, not mixed
    assert json.loads((out / "run_options.json").read_text())["algorithm"] == "fedavg"
    assert main(["run", "--resume", str(out), "--overwrite", "--rounds", "2"]) == 2
    assert "--overwrite does not apply to --resume" in capsys.readouterr().err


def test_resume_removes_the_temporaries_of_a_write_cut_by_a_kill(tmp_path):
    """A kill during a checkpoint write leaves ``.checkpoint.pt.<random>.tmp`` (the atomic
    writer's temporary, never renamed); the resume removes it — and nothing else: not a
    link of that name (its target stays), not another file."""
    out = tmp_path / "run"
    argv = ["run", "--algorithm", "fedavg", "--clients", "3", "--clients-per-round", "3",
            "--checkpoint-every", "1", "--no-progress", "--out", str(out)]
    assert main([*argv, "--rounds", "2"]) == 0
    stale = [out / ".checkpoint.pt.k1ll3d.tmp", out / ".history.json.x9.tmp",
             out / ".summary.json.a.tmp"]
    for path in stale:
        path.write_bytes(b"\x80half a pickle")
    target = tmp_path / "keep-me"
    target.write_text("not yours")
    (out / ".checkpoint.pt.link.tmp").symlink_to(target)
    (out / "notes.checkpoint.pt.tmp").write_text("mine")
    assert main(["run", "--resume", str(out), "--rounds", "3", "--no-progress"]) == 0
    assert not any(p.exists() for p in stale)          # mutation: no removal -> all three
    assert target.read_text() == "not yours" and (out / "notes.checkpoint.pt.tmp").exists()
