"""verification/checks/engine_oracles.py: importing it registers one identity check per oracle
of every family module of verification/oracles (and nothing else)."""

from verification.checks.engine_oracles import FAMILIES
from verification.core.registry import load_all
from verification.oracles.registry import oracles


def test_every_family_module_is_imported_and_registers_its_checks():
    checks = load_all()
    assert set(FAMILIES) == {"averaging", "clustered", "clustered_soft", "decoupled", "pfedfda",
                             "ppfe", "prototypes", "regularized", "sam", "server_optimizers"}
    ids = {i for i, c in checks.items() if i.endswith(".engine_equals_oracle")}
    assert ids >= {o.check_id for o in oracles().values()}
    assert len(oracles()) == 38
    for o in oracles().values():
        assert checks[o.check_id].kind == "identity"


def test_pflt_verify_only_imports_this_module_when_a_pattern_can_match_its_ids():
    from verification.checks.engine_oracles import CHECK_IDS_END_WITH
    from verification.core.runner import modules_declaring
    from verification.oracles.registry import CHECK_SUFFIX

    assert CHECK_IDS_END_WITH == CHECK_SUFFIX
    # '*.engine_equals_oracle*' and 'pfedme.*' also match literal ids of engine_oracle.py
    for pattern in ("*.engine_equals_oracle*", "pfedme.*", "*", "fedprox.*"):
        wanted = modules_declaring("verification.checks", pattern)
        assert wanted is None or "engine_oracles" in wanted, pattern
    assert "engine_oracles" in modules_declaring("verification.checks", "fedprox.*")
    for pattern in ("cgpfl.local_gradient", "*.engine_equals_oracle_form"):
        assert "engine_oracles" not in modules_declaring("verification.checks", pattern)
