"""The oracle registry (verification/oracles/registry.py): every registered algorithm has an
engine-vs-oracle identity check (34 of 34), the comparison sees every kind of difference,
and a plugin's oracle appears in ``pflt verify`` as its own check."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from algorithms.engine.base import registry
from verification.oracles.registry import Oracle, deviation, oracles, register_oracle

ROOT = Path(__file__).resolve().parents[3]


def test_every_algorithm_has_an_engine_equals_oracle_identity_check(checks):
    names = registry()
    assert len(names) >= 34
    missing = []
    for name in names:
        ids = [f"{name}.engine_equals_oracle", f"{name}.engine_equals_oracle_form"]
        found = [checks[i] for i in ids if i in checks]
        if not found or any(c.kind != "identity" for c in found):
            missing.append(name)
    assert missing == []
    # a per-client oracle for every one (four also have an oracle form, engine_oracle.py)
    assert set(names) - set(oracles()) == set()


def test_tolerances_are_float64_tight_and_justified(checks):
    for name, oracle in oracles().items():
        chk = checks[oracle.check_id]
        assert chk.tolerance <= 1e-8 and chk.tolerance_reason
        assert oracle.rounds >= 2 and chk.quick["rounds"] >= 2
        if chk.tolerance > 1e-10:      # only where a solver is involved, said in the reason
            assert "solver" in chk.tolerance_reason, name


def _q(v):
    return [{"a": torch.tensor(v, dtype=torch.float64)}]


@pytest.mark.parametrize("other,expected", [
    (_q([1.0, 2.0]), 0.0),
    (_q([1.0, 2.0 + 1e-6]), 1e-6 / 2.0),
    (_q([1.0, float("nan")]), float("inf")),
    (_q([1.0, 2.0, 3.0]), float("inf")),
    ([{"b": torch.tensor([1.0, 2.0])}], float("inf")),
    (_q([1.0, 2.0]) * 2, float("inf")),
])
def test_deviation_sees_values_nans_shapes_keys_and_rounds(other, expected):
    got = deviation(other, _q([1.0, 2.0]))
    assert got == pytest.approx(expected, rel=1e-6) if expected < float("inf") else got == expected


def test_fewer_than_two_rounds_are_refused():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        register_oracle(Oracle("x", "p", "r", None, None, None, None, rounds=1))


PLUGIN = '''
from dataclasses import dataclass

from algorithms.engine.base import register
from algorithms.methods.averaging.fedavg import FedAvg
from verification.oracles import Oracle, register_oracle
from verification.oracles.averaging import fedavg_round
from verification.oracles.common import default_setting
from verification.oracles.registry import models_of, stepwise


@register("oracle-demo")
@dataclass(frozen=True)
class Demo(FedAvg):
    """FedAvg under another name (McMahan et al., AISTATS 2017)."""


register_oracle(Oracle(
    "oracle-demo", "FedAvg (McMahan et al., AISTATS 2017)", "R local SGD steps, weighted mean",
    lambda: Demo(lr=0.1, local_rounds=2, batch_size=5, clients_per_round=3), default_setting,
    stepwise(fedavg_round, models_of("global")), models_of("global")))
'''


def test_a_plugin_oracle_is_a_check_of_pflt_verify(tmp_path):
    plugin = tmp_path / "demo_plugin.py"
    plugin.write_text(textwrap.dedent(PLUGIN))

    def pflt(*args):
        return subprocess.run([sys.executable, "-m", "pflt", "--plugin", str(plugin), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)

    listed = pflt("verify", "--list", "--only", "oracle-demo.*")
    assert listed.returncode == 0, listed.stderr
    assert "oracle-demo.engine_equals_oracle" in listed.stdout
    ran = pflt("verify", "--quick", "--only", "oracle-demo.*", "--no-progress",
               "--out", str(tmp_path / "out"))
    assert ran.returncode == 0, ran.stderr
    assert "1 HOLD" in ran.stdout, ran.stdout[-2000:]
