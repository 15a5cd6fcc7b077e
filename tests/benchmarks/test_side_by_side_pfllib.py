"""benchmarks/side_by_side_pfllib.py: the parameter mapping between our MLR rows and the
peer's nn.Linear is exact both ways (a transposed mapping is caught), and a path that is not
a PFLlib checkout is refused with one line (the peer itself is never in CI)."""

import pytest
import torch

from algorithms.models import MLR


def test_mlr_rows_round_trip_through_the_peers_linear(load_script):
    sbs = load_script("side_by_side_pfllib")
    model = MLR(5, 3)
    params = model.init(2, seed=0, dtype=torch.float64, same=False)
    x = torch.randn(4, 5, dtype=torch.float64)
    lin = sbs.to_linear(params, 1)
    # the peer's forward equals ours on the same row
    ours = model.forward({k: v[1:2] for k, v in params.items()}, x[None])[0]
    torch.testing.assert_close(lin(x), ours, rtol=0, atol=1e-15)
    back = sbs.from_linear(lin)
    assert sbs.max_diff(params, 1, back) == 0.0
    assert sbs.max_diff(params, 0, back) > 0.0        # another client's row differs


def test_not_a_pfllib_checkout_is_refused(load_script, tmp_path, capsys):
    sbs = load_script("side_by_side_pfllib")
    with pytest.raises(SystemExit) as e:
        sbs.main(["--pfllib", str(tmp_path)])
    assert e.value.code == 2
    assert "not a PFLlib checkout" in capsys.readouterr().err
