"""benchmarks/bench_history.py runs end to end on a tiny size (no timing asserted), and the
entries it times are shaped like a pFedMe run's."""

import json
import random


def test_main_runs_on_a_tiny_size(load_script, capsys):
    bench = load_script("bench_history")
    assert bench.main(["--clients", "5", "--evaluations", "2", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "E =     2:" in out and "E =     3:" in out
    assert out.strip().splitlines()[-1].startswith("append_seconds E=3:")


def test_entry_carries_one_accuracy_per_client_and_model(load_script):
    bench = load_script("bench_history")
    e = bench.entry(4, 7, random.Random(0))
    assert e["round"] == 4
    for name in ("personalized", "global", "local"):
        assert len(e[f"{name}_client_accuracy"]) == 7
    json.dumps(e)  # what History writes
