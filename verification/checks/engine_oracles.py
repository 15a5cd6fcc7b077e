"""The engine equals its per-client oracle, for every algorithm that has one.

Importing this module imports every family module of :mod:`verification.oracles`; each
registers its oracles and with them the identity checks ``<algorithm>.engine_equals_oracle``
(:func:`verification.oracles.registry.register_oracle`).  pFedMe, FedAvg, Per-FedAvg (FO) and
CGPFL are checked against their oracle form by :mod:`verification.checks.engine_oracle`.

The check ids are not literals in this source; :data:`CHECK_IDS_END_WITH` tells
``pflt verify --only`` (:func:`verification.core.runner.modules_declaring`) which patterns
need this module.
"""

from __future__ import annotations

import importlib
import pkgutil

import verification.oracles as _package

#: the ending of every id registered here (read from this source by ``pflt verify --only``)
CHECK_IDS_END_WITH = ".engine_equals_oracle"

FAMILIES = tuple(sorted(info.name for info in pkgutil.iter_modules(_package.__path__)
                        if info.name not in ("registry", "common", "mutations", "kmeans_plain")))

for _family in FAMILIES:
    importlib.import_module(f"verification.oracles.{_family}")
