"""benchmarks/gpu_check.sh: bad arguments and a missing GPU are one line, exit 2; the
dry run (the CPU path of every step, tiny sizes) writes the results file with every step
passed (slow tier: it loads Fashion-MNIST seven times, ~2 minutes here)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def _run(*args, timeout=60):
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={"PATH": "/usr/bin:/bin",
                                                           "PYTHON": sys.executable,
                                                           "HOME": str(Path.home())})


@pytest.mark.parametrize("args,message", [(["--bogus"], "unknown argument --bogus"),
                                          (["--budget", "8m"], "whole seconds")])
def test_bad_arguments_are_one_line_exit_2(args, message):
    done = _run(*args)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_refuses_and_points_to_the_dry_run(tmp_path):
    done = _run("--out", str(tmp_path / "r.json"))
    assert done.returncode == 2 and "--dry-run" in done.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_dry_run_writes_every_step_passed(tmp_path):
    from synthetic.real_data.home import find_dataset

    out = tmp_path / "gpu_check.json"
    done = _run("--dry-run", "--out", str(out), timeout=900)
    result = json.loads(out.read_text())
    names = [s["step"] for s in result["steps"]]
    assert names[:2] == ["cuda tests", "bench_engine"] and len(names) == 9, names
    assert result["dry_run"] and result["device"] == "cpu" and result["budget_s"] == 480
    expected = "skipped" if find_dataset("fmnist") is None else 0
    for s in result["steps"]:
        want = expected if s["step"].startswith("fmnist") else 0
        assert s["exit_code"] == want, (s["step"], s["output_tail"])
    assert done.returncode == 0 and result["passed"], done.stderr
