"""benchmarks/bench_scale.py runs end to end on a tiny size (no timing asserted)."""

import pytest
import torch


def test_main_prints_a_row_per_round_on_a_tiny_size(load_script, capsys):
    bench = load_script("bench_scale")
    threads = torch.get_num_threads()
    assert bench.main(["--clients", "12", "--clients-per-round", "3", "--rounds", "3",
                       "--eval-every", "2", "--max-client-size", "30",
                       "--set", "train_clients=sampled", "--set", "local_rounds=2"]) == 0
    out = capsys.readouterr().out
    assert "pfedme train_clients=sampled local_rounds=2" in out and "N=12, S=3" in out
    rows = [line for line in out.splitlines() if line[:4] in ("| 1 ", "| 2 ", "| 3 ")]
    assert len(rows) == 3 and all(r.count("|") == 9 for r in rows)
    assert "peak RSS" in out and "load average" in out
    assert torch.get_num_threads() == threads             # the thread count is restored


def test_hyperparameters_parse_numbers_and_words(load_script):
    bench = load_script("bench_scale")
    assert bench.hyperparameters(["a=1", "b=0.5", "c=sampled"]) == {"a": 1, "b": 0.5,
                                                                   "c": "sampled"}
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        bench.hyperparameters(["oops"])


def test_json_keeps_memory_in_bytes_and_the_conditions(load_script, tmp_path, capsys):
    import json

    bench = load_script("bench_scale")
    out = tmp_path / "scale.json"
    assert bench.main(["--clients", "12", "--clients-per-round", "3", "--rounds", "2",
                       "--max-client-size", "30", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"date", "commit", "machine", "load"} <= set(data["environment"])
    assert [r["round"] for r in data["rows"]] == [1, 2]
    rss = data["rows"][-1]["peak_rss_bytes"]
    # bytes, not KiB: a python process with torch loaded holds more than 50 MiB
    assert isinstance(rss, int) and rss > 50 * 2 ** 20
    assert "peak RSS GiB" in capsys.readouterr().out
