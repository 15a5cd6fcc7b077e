"""``pflt select-k``: smoke runs (planted spec, .npy file, JSON) and bad input."""

import dataclasses
import json
import math

import numpy as np
import pytest

from pflt.cli import main
from synthetic.contexts import planted_model_vectors


def test_planted_table(capsys):
    assert main(["select-k", "--planted", "16,3,4", "--noise", "0.3", "--mu", "0.1",
                 "--restarts", "3"]) == 0
    out = capsys.readouterr().out
    assert "K_hat = 3" in out and "planted K0 = 3" in out
    assert out.count("<- K_hat") == 1


def test_mu_rules_print_the_bands_and_the_relative_cap(capsys):
    # 10 planted contexts, d = 200 against m = 2000: relative μ capped at K <= 7 (one line);
    # the default widest band chooses 10 and prints the band of μ of every K on the envelope
    base = ["select-k", "--planted", "40,10,200", "--noise", "0.1", "--m", "2000",
            "--restarts", "3"]
    assert main(base + ["--mu-rule", "relative"]) == 0
    out = capsys.readouterr().out
    assert "relative mu caps K_hat <= 7 whatever the data" in out
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "K_hat = 10" in out and "caps" not in out and "(widest band)" in out
    assert [ln.split()[0] for ln in out.splitlines() if "(K_hat)" in ln] == ["K=10"]
    assert main(base + ["--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    lo, hi = next((b[1], b[2]) for b in js["mu_bands"] if b[0] == 10)
    assert js["inputs"]["mu_rule"] == "widest-band" and lo < js["inputs"]["mu"] < hi


def test_models_file_json_matches_independent_e(tmp_path, capsys):
    x, _ = planted_model_vectors(10, 2, 3, separation=8.0, noise=0.2, seed=1)
    path = tmp_path / "models.npy"
    np.save(path, x)
    assert main(["select-k", "--models", str(path), "--mu", "0.2", "--m", "500", "--json",
                 "--restarts", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k_hat"] == 2 and out["ks"] == [1, 2, 3, 4, 5]
    lg = math.log(math.e * 500 / 3)
    expected = [math.sqrt(3 * k / 500 * lg) + 0.2 * c for k, c in zip(out["ks"], out["cost"])]
    np.testing.assert_allclose(out["e"], expected, rtol=1e-12)
    assert len(out["labels"]) == 10 and out["inputs"]["m"] == 500 and out["inputs"]["d"] == 3


def test_default_m_and_client_sizes(tmp_path, capsys):
    x, _ = planted_model_vectors(6, 2, 2, separation=5.0, noise=0.1, seed=2)
    np.save(tmp_path / "m.npy", x)
    assert main(["select-k", "--models", str(tmp_path / "m.npy"), "--json", "--mu", "1.0"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["m"] == 600  # documented default 100 * N
    np.save(tmp_path / "s.npy", np.arange(1, 7) * 10.0)
    assert main(["select-k", "--models", str(tmp_path / "m.npy"), "--client-sizes",
                 str(tmp_path / "s.npy"), "--json", "--mu", "1.0"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["m"] == 210


@pytest.mark.parametrize("argv, msg", [
    (["--models", "/no/such/file.npy"], "not found"),
    (["--planted", "10,3"], "three integers"),
    (["--planted", "10,3,4", "--m", "0.5"], "log"),
    (["--planted", "10,3,4", "--k-max", "11"], "k_max"),
    (["--planted", "10,3,4", "--mu", "-1"], "mu"),
    (["--planted", "2,3,4"], "k0 must be <= num_clients"),
])
def test_bad_input(argv, msg, capsys):
    assert main(["select-k", *argv] + ([] if "--mu" in argv else ["--mu", "1.0"])) == 2
    assert msg in capsys.readouterr().err


def test_mu_is_optional_and_scale_free(tmp_path, capsys):
    x, _ = planted_model_vectors(30, 4, 10, separation=6.0, noise=0.5, seed=0)
    outs = []
    for scale in (1.0, 1e200, 1e-150):
        np.save(tmp_path / "m.npy", x * scale)
        assert main(["select-k", "--models", str(tmp_path / "m.npy"), "--json",
                     "--restarts", "5"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert [o["k_hat"] for o in outs] == [4, 4, 4]
    assert all(np.all(np.isfinite(o["e"])) for o in outs)
    np.testing.assert_allclose(outs[1]["e"], outs[0]["e"], rtol=1e-9)
    assert outs[0]["inputs"]["mu_rule"] == "widest-band"
    assert outs[0]["alternatives"]["bic"]["k_hat"] == 4
    assert len(outs[0]["relative_cost"]) == len(outs[0]["ks"]) == 15


def _fake_run(tmp_path, n=12, k0=3):
    """A run directory with a checkpoint whose personalized models hold k0 planted groups."""
    import torch

    from algorithms.engine.base import State
    from algorithms.engine.checkpoint import save_checkpoint

    x, assign = planted_model_vectors(n, k0, 6, separation=8.0, noise=0.3, seed=4)
    models = {"personalized": {"w": torch.as_tensor(x[:, :4].reshape(n, 2, 2)),
                               "b": torch.as_tensor(x[:, 4:])}}
    state = State(5, 0, models, {"assignment": torch.as_tensor(assign)})

    @dataclasses.dataclass(frozen=True)
    class Hp:  # stands in for an algorithm: save_checkpoint stores its fields
        lam: float = 12.0

    save_checkpoint(tmp_path / "checkpoint.pt", state, Hp())
    return x, assign


def test_from_run_reads_the_checkpoint(tmp_path, capsys):
    x, assign = _fake_run(tmp_path)
    assert main(["select-k", "--from-run", str(tmp_path), "--json", "--m", "1200",
                 "--restarts", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k_hat"] == 3 and out["inputs"]["n_clients"] == 12 and out["inputs"]["d"] == 6
    assert out["inputs"]["models_key"] == "personalized" and out["inputs"]["round"] == 5
    assert out["inputs"]["hyperparameters"] == {"lam": 12.0}
    labels = np.asarray(out["labels"])
    assert len({(a, b) for a, b in zip(labels, assign)}) == 3  # the planted partition


def test_from_run_errors(tmp_path, capsys):
    assert main(["select-k", "--from-run", str(tmp_path / "nope")]) == 2
    assert "no run directory" in capsys.readouterr().err
    assert main(["select-k", "--from-run", str(tmp_path)]) == 2
    assert "--checkpoint-every" in capsys.readouterr().err
    _fake_run(tmp_path)
    assert main(["select-k", "--from-run", str(tmp_path), "--models-key", "context"]) == 2
    assert "not in the checkpoint" in capsys.readouterr().err


def test_wrong_shapes(tmp_path, capsys):
    np.save(tmp_path / "v.npy", np.zeros(5))
    assert main(["select-k", "--models", str(tmp_path / "v.npy"), "--mu", "1.0"]) == 2
    assert "shape [N, d]" in capsys.readouterr().err
    np.save(tmp_path / "m.npy", np.random.default_rng(0).normal(size=(6, 2)))
    np.save(tmp_path / "s.npy", np.ones(4))
    assert main(["select-k", "--models", str(tmp_path / "m.npy"), "--client-sizes",
                 str(tmp_path / "s.npy"), "--mu", "1.0"]) == 2
    assert "--client-sizes must have shape [6]" in capsys.readouterr().err
    (tmp_path / "bad.npy").write_text("not numpy")
    assert main(["select-k", "--models", str(tmp_path / "bad.npy"), "--mu", "1.0"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_from_run_validation_rebuilds_the_data(tmp_path, capsys):
    # --validation needs no checkpoint: run_options.json rebuilds the federation; the run's
    # cgpfl hyper-parameters are used
    argv = _validation_run(tmp_path, capsys)
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["method"] == "validation" and res["ks"] == [1, 2, 3]
    assert res["k_hat"] == res["k_hat_by_rule"]["max"]
    assert res["inputs"]["hyperparameters"]["local_rounds"] == 2
    assert res["inputs"]["hyperparameters"]["inner_steps"] == 1
    assert main(argv) == 0
    assert capsys.readouterr().out.count("<- K_hat") == 1


def test_validation_states_its_cost_and_shows_progress(tmp_path, capsys):
    # the default (4-fold CV, k_max = N/2) runs 4·(3 + 50·7) = 1412 CGPFL rounds at N = 100:
    # the user is told the cost up front and sees a bar over the (fold, K) runs, on stderr
    argv = _validation_run(tmp_path, capsys)
    assert main([*argv, "--json"]) == 0
    cap = capsys.readouterr()
    json.loads(cap.out)                              # stdout stays pure JSON
    assert "4 fold(s) × (1 warm-up + k_max 3 × 1) = 16 CGPFL rounds on N = 8" in cap.err
    assert "12/12" in cap.err                        # the bar: 4 folds × 3 values of K
    assert main([*argv, "--no-progress"]) == 0
    cap = capsys.readouterr()
    assert "16 CGPFL rounds" in cap.err and "12/12" not in cap.err


def test_validation_needs_the_run(tmp_path, capsys):
    np.save(tmp_path / "m.npy", np.zeros((4, 2)))
    assert main(["select-k", "--models", str(tmp_path / "m.npy"), "--validation"]) == 2
    assert "--from-run" in capsys.readouterr().err
    assert main(["select-k", "--from-run", str(tmp_path), "--validation"]) == 2
    assert "run_options.json" in capsys.readouterr().err


def _validation_run(tmp_path, capsys, clients=8, size=30, local_rounds=2):
    out = tmp_path / "run"
    assert main(["run", "--algorithm", "cgpfl", "--out", str(out), "--clients", str(clients),
                 "--rounds", "1", "--max-client-size", str(size), "--no-progress",
                 "--local-rounds", str(local_rounds), "--inner-steps", "1"]) == 0
    capsys.readouterr()
    return ["select-k", "--from-run", str(out), "--validation", "--val-warmup", "1",
            "--val-rounds", "1", "--k-max", "3", "--restarts", "2"]


def test_validation_criterion(tmp_path, capsys):
    from pflt.commands.select_k import DEFAULT_CRITERION

    full_cv = _validation_run(tmp_path, capsys)
    argv = [*full_cv, "--val-cv", "1"]       # one hold-out (val_loss / val)
    got = {}
    for crit in ("loss", "accuracy"):
        assert main([*argv, "--criterion", crit, "--json"]) == 0
        got[crit] = json.loads(capsys.readouterr().out)
    lo, ac = got["loss"], got["accuracy"]
    # the same runs; each criterion shows its own whole curve and K̂ (argmin / argmax)
    assert lo["validation_loss"] == ac["validation_loss"] and lo["curve"] == lo["validation_loss"]
    assert ac["curve"] == ac["validation_accuracy"] and lo["curve_se"] == lo["loss_se"]
    assert lo["k_hat"] == int(np.argmin(lo["curve"])) + 1 == lo["k_hat_by_rule"]["max"]
    assert ac["k_hat"] == int(np.argmax(ac["curve"])) + 1
    assert lo["criterion"] == lo["inputs"]["criterion"] == "loss" and ac["criterion"] == "accuracy"
    assert lo["k_hat_by_criterion"]["loss"] == lo["k_hat_by_rule"]
    assert all(v > 0 for v in lo["curve"])      # cross-entropy of 3 classes or more, finite
    assert DEFAULT_CRITERION == "loss"           # the benchmark's winner (docs/selection.md)
    assert main([*argv, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["criterion"] == "loss" and default["k_hat"] == lo["k_hat"]
    # the default is full cross-validation (every one of the 4 folds held out once:
    # val_cv_loss, the benchmark's recommendation), a different curve from one hold-out
    assert main([*full_cv, "--json"]) == 0
    cv4 = json.loads(capsys.readouterr().out)
    assert cv4["inputs"]["cv"] == 4 == cv4["inputs"]["folds"] and cv4["criterion"] == "loss"
    assert cv4["curve"] != lo["curve"] and cv4["k_hat"] == int(np.argmin(cv4["curve"])) + 1
    # two folds in turn: the loss summed over both, a different curve
    assert main([*argv, "--val-cv", "2", "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert two["inputs"]["cv"] == 2 and two["curve"] != lo["curve"]
    assert two["k_hat"] == int(np.argmin(two["curve"])) + 1
    assert main([*argv, "--criterion", "loss"]) == 0
    text = capsys.readouterr().out
    assert "criterion loss" in text and text.count("<- K_hat") == 1 and "val. loss" in text


def test_criterion_bad_value_and_misuse(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["select-k", "--planted", "10,3,4", "--criterion", "brier"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--criterion" in err and "invalid choice" in err and "'loss'" in err
    assert main(["select-k", "--planted", "10,3,4", "--criterion", "loss"]) == 2
    assert "needs --validation" in capsys.readouterr().err
    argv = _validation_run(tmp_path, capsys)
    assert main([*argv, "--val-cv", "5"]) == 2       # more than the 4 folds
    assert "--val-cv must lie in [1, --val-folds = 4]" in capsys.readouterr().err


def test_validation_k_max_defaults_to_the_benchmark_grid_and_flags_the_edge(tmp_path, capsys):
    # --validation's default k_max is min(N // 2, 10) (N = 24 here: 10, not 12), and a K̂ on
    # the last K searched while larger K exist is flagged on stderr and in --json
    from pflt.commands.select_k import VALIDATION_K_CAP

    run = _validation_run(tmp_path, capsys, clients=24, size=20, local_rounds=1)
    argv = [*run[:-4], "--val-cv", "1", "--restarts", "1", "--no-progress", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert VALIDATION_K_CAP == 10 and res["inputs"]["k_max"] == 10 and res["ks"][-1] == 10
    assert res["at_grid_edge"] == (res["k_hat"] == 10)
    # a grid of K = 1, 2 whose K̂ is forced onto the edge by the loss curve's argmin at 2 or
    # not: the flag follows exactly "K̂ == k_max < N // 2"
    assert main([*argv, "--k-max", "2"]) == 0
    cap = capsys.readouterr()
    two = json.loads(cap.out)
    assert two["at_grid_edge"] == (two["k_hat"] == 2)
    assert ("largest K searched" in cap.err) == two["at_grid_edge"]
    assert main([*argv, "--k-max", "1"]) == 0           # K̂ = 1 = k_max < 12: always flagged
    cap = capsys.readouterr()
    assert json.loads(cap.out)["at_grid_edge"] is True and "rerun with a larger --k-max" in cap.err
    assert main([*argv, "--k-max", "12"]) == 0          # N // 2: nothing beyond, never flagged
    assert json.loads(capsys.readouterr().out)["at_grid_edge"] is False


def test_select_k_runs_on_one_torch_thread_unless_told(monkeypatch, capsys):
    # as pflt run / verify / figures: PFLT_THREADS or one thread (pfl_theory.threads)
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        monkeypatch.delenv("PFLT_THREADS", raising=False)
        assert main(["select-k", "--planted", "10,3,4", "--json"]) == 0
        assert torch.get_num_threads() == 1
        monkeypatch.setenv("PFLT_THREADS", "2")
        assert main(["select-k", "--planted", "10,3,4", "--json"]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
