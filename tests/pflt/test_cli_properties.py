"""Property test of ``pflt run``'s input space (issue 18): for options drawn valid and
invalid, given on the command line or in a TOML config, the outcome is success (exit 0)
with the recorded options equal to those used, or exit 2 with exactly one error line —
never a traceback, never another exit code.  Runs are tiny (fedavg, ≤ 5 clients of ≤ 20
samples, 1 round, 1 local step)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pflt.cli import main

HUGE = 10**25
# option -> (valid values, invalid values); None = leave the option out
OPTIONS = {
    "clients": ([2, 3, 5], [0, -1, HUGE]),
    "seed": ([0, 7, 2**32 - 1], [-1, HUGE]),
    "data_seed": ([0, 3], [-2, HUGE]),
    "model": (["mlr", "dnn", "mlp"], ["resnet", ""]),
    "dtype": (["float32", "float64"], ["float16", "int8"]),
    "hidden": ([4, 6], [0, -4, HUGE]),
    "device": (["cpu"], ["banana", "cuda:99"]),
    "threads": ([1], [0, -3, HUGE]),
    "lr": ([0.01, 0.05], [float("nan"), -1.0, 0.0]),
    "batch_size": ([2, 5], [0, -5, HUGE]),
    "l2": ([0.0, 0.001], [float("inf"), -1.0]),
}


def _value(name, bad: str | None):
    valid, invalid = OPTIONS[name]
    return st.sampled_from(list(invalid)) if name == bad else st.sampled_from([None, *valid])


def _toml(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return repr(value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), in_toml=st.sets(st.sampled_from(sorted(OPTIONS))))
def test_run_is_success_or_one_line_error(data, in_toml):
    # either every value valid, or exactly one option invalid (so that each invalid value
    # is seen on its own, not masked by another error)
    bad = data.draw(st.sampled_from([None, *OPTIONS]), label="invalid option")
    values = data.draw(st.fixed_dictionaries({n: _value(n, bad) for n in OPTIONS}),
                       label="values")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "o"
        argv = ["run", "--algorithm", "fedavg", "--rounds", "1", "--local-rounds", "1",
                "--clients-per-round", "2", "--max-client-size", "20", "--no-progress",
                "--out", str(out)]
        toml = []
        for name, value in values.items():
            if value is None:
                continue
            if name == "hidden" and values["model"] in (None, "mlr"):
                continue  # --hidden with mlr is its own error, checked elsewhere
            if name in in_toml:
                toml.append((name in ("lr", "batch_size"), f"{name} = {_toml(value)}"))
            else:
                argv += [f"--{name.replace('_', '-')}", str(value)]
        if toml:
            top = [line for is_hp, line in toml if not is_hp]
            hps = [line for is_hp, line in toml if is_hp]
            text = "\n".join(top + (["[hyperparameters]"] + hps if hps else [])) + "\n"
            (Path(tmp) / "c.toml").write_text(text)
            argv += ["--config", str(Path(tmp) / "c.toml")]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        text = err.getvalue()
        if os.environ.get("PFLT_PROPERTY_LOG"):  # outcome classes, for the closing note
            with open(os.environ["PFLT_PROPERTY_LOG"], "a") as fh:
                fh.write(f"{code}\t{text.strip().splitlines()[-1] if text.strip() else ''}\n")
        assert "Traceback" not in text
        assert code in (0, 2), text
        if code == 2:
            errors = [ln for ln in text.splitlines() if "error" in ln]
            assert len(errors) == 1, text
            return
        recorded = json.loads((out / "run_options.json").read_text())
        hist = json.loads((out / "history.json").read_text())
        for name, value in values.items():
            if value is None or (name == "hidden" and values["model"] in (None, "mlr")):
                continue
            if name in ("lr", "batch_size"):
                assert hist["config"]["hyperparameters"][name] == value
            else:
                assert recorded[name] == value, (name, recorded[name], value)
        if values["dtype"] is not None:
            assert hist["config"]["dtype"] == f"torch.{values['dtype']}"
