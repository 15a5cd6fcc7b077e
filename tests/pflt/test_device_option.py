"""``--device`` on the commands that train or evaluate (verify, figures, select-k,
select-stages, worst-case, sweep; the leaderboard benchmark passes it to its sweeps): a device this
machine lacks is one line, exit 2; the device reaches the federations that the checks
build (synthetic.federation.device_scope) and every sweep cell's options."""

import argparse

import pytest
import torch

import synthetic.federation as federation
from pflt.cli import main
from pflt.commands._device import with_device

COMMANDS = [["verify", "--only", "nothing-matches"], ["figures", "--list"],
            ["select-k", "--planted", "8,2,3"], ["select-stages", "--gamma", "0.5"],
            ["worst-case", "--rounds", "1"]]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize("device", ["cuda", "tpu"])
def test_a_missing_device_is_one_line_exit_2(argv, device, capsys):
    assert main([*argv, "--device", device]) == 2
    err = capsys.readouterr().err
    assert "--device" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err


def test_the_device_reaches_the_federations_the_checks_build(monkeypatch):
    """Inside ``with_device`` the verification code builds its data on the chosen device —
    shown with PyTorch's ``meta`` device standing in for a GPU (the CPU-only machine has
    no other), the check of the device name patched to accept it."""
    from verification.checks import plgu_algorithms

    real = federation.resolve_device
    monkeypatch.setattr(federation, "resolve_device",
                        lambda d=None: torch.device("meta") if str(d) == "meta" else real(d))
    monkeypatch.setattr("pflt.commands.run_checks.check_device", lambda d: d)
    seen = {}

    def command(args):
        seen["fed"] = plgu_algorithms._blobs(0, 3).device
        return 0

    assert with_device(command)(argparse.Namespace(device="meta")) == 0
    assert seen["fed"] == torch.device("meta")
    assert with_device(command)(argparse.Namespace(device=None)) == 0
    assert seen["fed"] == torch.device("cpu")        # no --device: as before


def test_sweep_passes_the_device_to_every_cell(tmp_path):
    from pflt.commands.sweep import cells, grid

    base = tmp_path / "base.toml"
    base.write_text('clients = 10\nrounds = 1\n')
    found = cells(grid({"seed": [0, 1]}), base, tmp_path / "out", True, device="cpu")
    assert [c["options"]["device"] for c in found] == ["cpu", "cpu"]
    found = cells(grid({"seed": [0]}), base, tmp_path / "out", True)
    assert found[0]["options"]["device"] is None
