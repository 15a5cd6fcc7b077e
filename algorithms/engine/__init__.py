"""The batched engine: the algorithm contract and registry (:mod:`.base`, :mod:`.contract`),
the runner with its run directory, checkpoints and resume (:mod:`.runner`, :mod:`.run_dir`,
:mod:`.run_files`, :mod:`.checkpoint`, :mod:`.resume`), evaluation (:mod:`.evaluation`),
the batched models (:mod:`.models`, :mod:`.models_norm`, :mod:`.functional`) and the shared
local-step building blocks methods are written with (:mod:`.steps`, :mod:`.features`,
:mod:`.heads`). The engine imports no method and does not know it is checked."""
