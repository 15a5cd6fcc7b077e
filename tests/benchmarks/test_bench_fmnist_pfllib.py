"""benchmarks/bench_fmnist_pfllib.py (workload W2): a path that is not a PFLlib checkout stops
it with one line and exit 2; its mapping of our CNN onto PFLlib's FedAvgCNN layout (re-written here
with the same module names: conv1/conv2 = Sequential(conv, ReLU, pool), fc1 = Sequential(
Linear, ReLU), fc) gives the peer our logits, so both sides time the same network."""

import torch
from torch import nn


def test_missing_checkout_is_one_line_and_exit_2(load_script, tmp_path, capsys):
    bench = load_script("bench_fmnist_pfllib")
    assert bench.main(["--pfllib", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a PFLlib checkout" in err and err.count("\n") == 1


class FedAvgCNNLayout(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.fc1 = nn.Sequential(nn.Linear(1024, 512), nn.ReLU())
        self.fc = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc(self.fc1(self.conv2(self.conv1(x)).flatten(1)))


def test_the_peer_network_computes_our_logits(load_script):
    bench = load_script("bench_fmnist_pfllib")
    model = bench.our_cnn()
    params = model.init(1, seed=2, dtype=torch.float64)
    net = bench.load_net(FedAvgCNNLayout().double(), params)
    x = torch.randn(1, 3, 1, 28, 28, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(0))
    # float64, the same layers; conv and dense kernels differ only in summation order
    torch.testing.assert_close(net(x[0]), model.forward(params, x)[0], rtol=0, atol=1e-12)
    assert sum(p.numel() for p in net.parameters()) == sum(v.numel() for v in params.values())
    # the plain loop's own network (bench.fedavg_cnn) is the same layout
    loop = bench.load_net(bench.fedavg_cnn().double(), params)
    torch.testing.assert_close(loop(x[0]), net(x[0]), rtol=0, atol=1e-12)


def test_the_flop_count_is_the_issues(load_script):
    """49.4 GFLOP for a W2 FedAvg training round (R = 5, |D| = 10, N = 40), the figure
    measured independently in issue 44; one forward is ~8.4 MFLOP per sample."""
    bench = load_script("bench_fmnist_pfllib")
    train, forward = bench.round_flops(5, 10)
    assert abs(train / 1e9 - 49.4) < 0.05
    assert abs(forward / 1e6 - 8.4) < 0.2
