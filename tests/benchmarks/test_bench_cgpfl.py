"""benchmarks/bench_cgpfl.py runs end to end on a tiny size (no timing asserted)."""

import torch


def test_main_runs_on_a_tiny_size(load_script, capsys):
    bench = load_script("bench_cgpfl")
    threads = torch.get_num_threads()
    assert bench.main(["--sizes", "8", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "N=    8:" in out and "clustering" in out
    torch.set_num_threads(threads)
