"""benchmarks/bench_cgpfl.py runs end to end on a tiny size (no timing asserted)."""

import torch


def test_main_runs_on_a_tiny_size(load_script, capsys):
    bench = load_script("bench_cgpfl")
    threads = torch.get_num_threads()
    assert bench.main(["--sizes", "8", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "N=    8:" in out and "clustering" in out
    torch.set_num_threads(threads)


def test_contexts_mode_runs_before_and_after_and_finds_them_identical(load_script, capsys):
    """--contexts: one line per K with after/before s/round and the bit-for-bit comparison
    (the 'before' k-means is loaded from git; without git only 'after' is printed)."""
    bench = load_script("bench_cgpfl")
    threads = torch.get_num_threads()
    assert bench.main(["--contexts", "1", "3", "--clients", "6", "--rounds", "1",
                       "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "load average" in out and "K=  1: after" in out and "K=  3: after" in out
    if "before" in out.split("\n", 1)[1]:
        assert out.count("identical: True") == 2
    torch.set_num_threads(threads)


def test_bits_equal_sees_one_ulp(load_script):
    bench = load_script("bench_cgpfl")
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    b = a.clone()
    b[1] = torch.nextafter(b[1], torch.tensor(3.0, dtype=torch.float64))
    assert bench._bits_equal({"w": a}, {"w": a.clone()})
    assert not bench._bits_equal({"w": a}, {"w": b})
