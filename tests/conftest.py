"""Shared builders with small defaults (SAELens style) and an autouse seed; no network, no GPU."""

from __future__ import annotations

import random

from jaxtyping import install_import_hook

# Runtime shape and type checks on the analyses and interventions too (the core's come from pytest's
# --jaxtyping-packages in pyproject.toml); installed before any test module imports them.
install_import_hook(["analyses", "hooks"], "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))")

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.tasks.sampling import sample_tasks


@pytest.fixture(autouse=True)
def seed_everything():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


def make_cfg(**overrides) -> ICTDConfig:
    return ICTDConfig(**{"d_features": 3, "n_layers": 2, "dtype": "float64", **overrides})


def make_tasks(n_tasks=4, n_states=6, d=3, n=12, gamma=0.9, **kwargs):
    return sample_tasks(n_tasks, n_states, d, n, gamma, seed=kwargs.pop("seed", 0), **kwargs)


def make_star(**overrides) -> HookedICTDTransformer:
    return HookedICTDTransformer.from_theta_star(make_cfg(**overrides))
