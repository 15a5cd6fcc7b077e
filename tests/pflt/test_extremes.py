"""Extreme inputs refused up front with one line (exit 2), or ending in the divergence
contract (exit 1) — never a traceback, a hang or a silent default."""

import os
import subprocess
import sys

import pytest

from pflt.cli import main

TINY = ["--clients", "4", "--max-client-size", "30", "--rounds", "1", "--no-progress",
        "--clients-per-round", "2"]


def _one_line(capsys, code, expected_code, *words):
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert code == expected_code and len(err) == 1, err
    for w in words:
        assert w in err[0], err[0]


@pytest.mark.parametrize("argv, words", [
    (["--lam", "1e300"], ["lam=1e+300", "beyond the range of torch.float32"]),
    (["--algorithm", "ifca", "--num-contexts", "1000000"], ["num_contexts k=1000000 > number of clients N=4"]),
    (["--data", "synthetic:fx"], ["synthetic is generated; it takes no ':fx'"]),
    (["--data", "mnist:~nowhere-user-xyz"], ["cannot expand", "no such user"]),
])
def test_refused_with_one_line(tmp_path, capsys, argv, words):
    code = main(["run", *TINY, "--out", str(tmp_path / "o"), *argv])
    _one_line(capsys, code, 2, *words)


def test_overflowing_products_end_in_the_divergence_contract(tmp_path, capsys):
    code = main(["run", *TINY, "--out", str(tmp_path / "o"), "--lr", "1e20", "--lam", "1e20"])
    _one_line(capsys, code, 1, "overflowed torch.float32", "diverged")


def test_too_many_threads_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PFLT_THREADS", "100000")     # torch crashes (segfault) on it
    code = main(["run", *TINY, "--out", str(tmp_path / "o")])
    _one_line(capsys, code, 2, "PFLT_THREADS=100000 is more than")


def test_closed_stdout_ends_quietly():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-c", "import sys; from pflt.cli import main; "
                          "sys.exit(main(['list', 'algorithms']))"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                         close_fds=True, pass_fds=(), timeout=120,
                         preexec_fn=lambda: os.close(1))
    assert "Traceback" not in res.stderr and res.returncode in (0, 141), res.stderr


def test_ctrl_c_while_starting_is_one_line(capsys, monkeypatch):
    import pflt.cli as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["list"]) == 130
    assert capsys.readouterr().err.strip() == "pflt: interrupted"


@pytest.mark.parametrize("algorithm", ["fedavg", "ppfe"])
def test_select_k_from_a_run_without_client_models_is_refused(tmp_path, capsys, algorithm):
    out = tmp_path / algorithm
    extra = ["--local-rounds", "1"] + (["--head-steps", "1"] if algorithm == "ppfe" else [])
    assert main(["run", "--algorithm", algorithm, *TINY, *extra, "--checkpoint-every", "1",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    _one_line(capsys, main(["select-k", "--from-run", str(out)]), 2,
              f"({algorithm}) holds no per-client")


@pytest.mark.parametrize("option", ["--inner-steps", "--local-rounds"])
def test_a_step_count_that_would_take_days_is_refused(tmp_path, capsys, option):
    code = main(["run", *TINY, "--out", str(tmp_path / "o"), option, "1000000000"])
    _one_line(capsys, code, 2, "is more than 100,000")


@pytest.mark.parametrize("algorithm,option", [("fedem", "--num-components"), ("pfedfda", "--beta-grid"),
                                              ("pfedfda", "--folds")])
def test_component_and_fold_counts_that_would_hang_are_refused(tmp_path, capsys, algorithm,
                                                                option):
    # both hung before (a mixture of 1e9 components; 1e9 cross-validation folds)
    code = main(["run", *TINY, "--algorithm", algorithm, "--out", str(tmp_path / "o"), option,
                 "1000000000"])
    _one_line(capsys, code, 2, "is more than 100,000")


def test_cpu_out_of_memory_is_one_line():
    """torch's CPU allocator raises a RuntimeError, not MemoryError (--model dnn --hidden
    1000000, pfedhn --hn-hidden 1000000000): reported as one line (exit 2)."""
    from pflt.cli import _anticipated, one_line

    exc = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                       "can't allocate memory: you tried to allocate 64000000000 bytes.")
    assert _anticipated(exc) and "\n" not in one_line(exc)
    assert not _anticipated(RuntimeError("a bug"))       # other RuntimeErrors keep theirs


def test_select_stages_validation_replay_beyond_the_bound_is_refused(tmp_path, capsys):
    out = tmp_path / "ppfe"
    assert main(["run", "--algorithm", "ppfe", "--total-rounds", "1000000000", *TINY,
                 "--local-rounds", "1", "--head-steps", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    _one_line(capsys, main(["select-stages", "--validation", "--from-run", str(out)]), 2,
              "= 5,000,000,000 rounds", "more than 100,000")
