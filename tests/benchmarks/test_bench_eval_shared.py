"""benchmarks/bench_eval_shared.py runs end to end on a tiny size (no timing asserted), and
the paths it times agree (it prints their largest per-client difference)."""

import re


def test_main_runs_on_a_tiny_size_and_paths_agree(load_script, capsys):
    bench = load_script("bench_eval_shared")
    assert bench.main(["--clients", "6", "--model", "mlr", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    diffs = [float(d) for d in re.findall(r"max \|diff\| vs flat ([0-9.e+-]+)", out)]
    assert len(diffs) == 3 and max(diffs) < 1e-5   # float32 sums in another order
    assert out.strip().splitlines()[-1].startswith("speedup N=6 mlr:")
