"""The registered methods, one sub-package per family of methods that share code.

========================  =================================================================
family                    methods
========================  =================================================================
:mod:`.averaging`         FedAvg, Local, FedProx, SCAFFOLD, FedBABU, FedAvg-FT, kNN-Per,
                          FedAvgM, FedAdagrad, FedYogi, FedAdam (server optimisers)
:mod:`.regularized`       pFedMe, Ditto, APFL, L2SGD, Per-FedAvg (personalized objectives)
:mod:`.clustered`         IFCA, CFL, FedAMP, FedEM, FedFomo, CGPFL, CGPFL-Heur
:mod:`.decoupled`         FedRep, FedPer, LG-FedAvg, FedBN, FedRoD, FedALA (body/head splits)
:mod:`.prototypes`        FedProto, FedPAC, pFedFDA (feature statistics)
:mod:`.sam`               FedSAM, PLGU-LF, PLGU-GRep, PLGU-GHN, pFedHN (sharpness-aware)
:mod:`.ppfe`              PPFE (progressive personalized ensembles) and its pieces
========================  =================================================================

A method imports the engine (:mod:`algorithms.engine`) and modules of its own family only;
families are independent of each other (import-linter contract in ``pyproject.toml``).
"""
