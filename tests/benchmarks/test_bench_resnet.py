"""benchmarks/bench_resnet.py runs end to end on a tiny ResNet-18-GN (no timing asserted) and
reports the parameter count of the network it timed."""

import re

from algorithms.engine.models_resnet import parameter_count


def test_main_runs_on_a_tiny_network_and_reports_it(load_script, capsys):
    bench = load_script("bench_resnet")
    assert bench.main(["--clients", "3", "--side", "8", "--channels", "1", "--batch", "2",
                       "--local-rounds", "1", "--width", "2", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{parameter_count(1, 10, 2):,} parameters per client" in out
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"resnet18-gn N=3: [0-9.]+ s/round CPU \(median [0-9.]+\), "
                        r"peak -?[0-9]+ MiB \(.*\)", last), last
    assert len(re.findall(r"[0-9.]+", out.splitlines()[2])) == 4      # 2 rounds, CPU and wall


def test_chunks_are_reported_and_written(load_script, capsys, tmp_path):
    import json

    bench = load_script("bench_resnet")
    out = tmp_path / "r.json"
    assert bench.main(["--clients", "4", "--side", "8", "--channels", "1", "--batch", "2",
                       "--local-rounds", "1", "--width", "2", "--repeats", "1",
                       "--client-chunk", "3", "--out", str(out)]) == 0
    assert "clients trained 3 at a time" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["client_chunk"] == 3 and data["parameters_per_client"] == parameter_count(1, 10, 2)
