"""benchmarks/bench_engine.py runs end to end on tiny sizes (no timing is asserted: speed is
shown by running the script) and counts FLOPs as its doc says."""

import pytest
import torch

from algorithms.methods.regularized.pfedme import PFedMe

TINY = ["--sizes", "3", "--threads", "1", "--repeats", "1", "--ref-clients", "2",
        "--max-client-size", "40"]


def test_main_prints_the_table_on_tiny_sizes(load_script, capsys):
    bench = load_script("bench_engine")
    threads = torch.get_num_threads()
    bench.main(TINY)
    out = capsys.readouterr().out
    assert "| N | thr | load | samples |" in out
    row = next(line for line in out.splitlines() if line.startswith("| 3 | 1 |"))
    assert row.count("|") == 19 and "*" in row           # 18 columns; baselines scaled (2 of 3)
    assert "floor" in out and "Optimizer" in out and "(optimistic)" in out
    assert "load average" in out
    assert torch.get_num_threads() == threads            # the thread count is restored


def test_flop_counts(load_script):
    bench = load_script("bench_engine")
    alg = PFedMe(local_rounds=20, inner_steps=5, batch_size=20)
    train, evaluation = bench.flops(100, 205_795, alg)
    # N·R·K steps of two products (logits, weight gradient) of 2·|D|·d·C FLOPs each
    assert train == 100 * 20 * 5 * 2 * (2 * 20 * 60 * 10) == 480_000_000
    # three models, 2·d·C per sample
    assert evaluation == 3 * 2 * 60 * 10 * 205_795 == 740_862_000


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_missing_cuda_is_a_one_line_error(load_script):
    bench = load_script("bench_engine")
    with pytest.raises(SystemExit) as exc:
        bench.main(TINY + ["--device", "cuda"])
    message = str(exc.value)
    assert "CUDA is not available" in message and "\n" not in message
