"""The PFLlib side-by-side script (benchmarks/side_by_side_pfllib.py): without a checkout it
stops with one line and exit 2; its peer network, loaded with our parameters, computes our
models' logits (so the parameter comparisons compare the same network); with a checkout
named by ``PFLLIB_DIR`` (never in CI) every algorithm agrees to float64 rounding."""

import os
from pathlib import Path

import pytest
import torch

from algorithms.engine.models import DNN, BatchNormMLP


def test_missing_checkout_is_one_line_and_exit_2(load_script, tmp_path, capsys):
    sbs = load_script("side_by_side_pfllib")
    assert sbs.main(["--pfllib", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a PFLlib checkout" in err and err.count("\n") == 1


@pytest.mark.parametrize("bn", [False, True])
def test_peer_network_computes_our_logits(load_script, bn):
    sbs = load_script("side_by_side_pfllib")
    model = (BatchNormMLP(sbs.DIM, sbs.CLASSES, hidden=(sbs.HIDDEN,)) if bn
             else DNN(sbs.DIM, sbs.CLASSES, hidden=sbs.HIDDEN))
    params = model.init(1, seed=3, dtype=torch.float64)
    if bn:   # statistics away from 0/1 so that the mapping of the buffers is exercised
        params["bn1.running_mean"] = params["bn1.running_mean"] + 0.3
        params["bn1.running_var"] = params["bn1.running_var"] * 2
    net = sbs.PeerNet(bn).double()
    sbs.to_peer(net, params)
    net.eval()
    x = torch.randn(1, 7, sbs.DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(net(x[0]), model.forward(params, x)[0], rtol=0, atol=1e-12)
    back = sbs.from_peer(net, list(params))
    assert all(torch.equal(back[k], params[k][0]) for k in params)


@pytest.mark.skipif(not os.environ.get("PFLLIB_DIR"), reason="needs a PFLlib checkout (PFLLIB_DIR)")
def test_against_pfllib(load_script, capsys):
    sbs = load_script("side_by_side_pfllib")
    assert sbs.main(["--pfllib", str(Path(os.environ["PFLLIB_DIR"])), "--rounds", "2"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("max difference:") and float(last.split()[-1]) < 1e-12
