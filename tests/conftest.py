"""Shared test configuration: one torch thread (the CI machine has 2 shared cores and
multi-threaded small ops are slower under contention), hypothesis profile without deadlines."""

import torch
from hypothesis import settings

torch.set_num_threads(1)
settings.register_profile("pflt", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("pflt")
