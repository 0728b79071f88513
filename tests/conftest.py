"""Shared builders with small defaults (SAELens style) and an autouse seed; no network, no GPU."""

from __future__ import annotations

import ast
import inspect
import os
import random
import re
import textwrap

# One thread for the suite and every process it starts (notebook kernels, subprocesses): on a busy 2-core machine
# two threads run several times slower than one (benchmarks/threads.py). Set before torch is first imported.
os.environ["OMP_NUM_THREADS"] = os.environ.get("ICTD_TEST_THREADS", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from ictd_interp import HookedICTDTransformer, HookedStandardTransformer, ICTDConfig
from ictd_interp.config.standard import StandardConfig
from ictd_interp.tasks.sampling import sample_tasks


@pytest.fixture(autouse=True)
def seed_everything():
    """Every test starts seeded, and the process's torch thread count is put back after it (the CLI sets
    its own, ``--threads`` or 1, for the rest of its process)."""
    threads = torch.get_num_threads()
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_optimiser_in_unit_tests(request, monkeypatch):
    """The unit tier holds no optimisation: building a ``torch.optim`` optimiser there (training, DAS, an SAE,
    however it is reached) fails the test, naming where it belongs."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(self, *args, **kwargs):
        raise RuntimeError(f"{request.node.nodeid}: builds a torch.optim optimiser; it belongs in tests/integration")

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", refuse)


def make_cfg(**overrides) -> ICTDConfig:
    return ICTDConfig(**{"d_features": 3, "n_layers": 2, "dtype": "float64", **overrides})


def make_tasks(n_tasks=4, n_states=6, d=3, n=12, gamma=0.9, **kwargs):
    return sample_tasks(n_tasks, n_states, d, n, gamma, seed=kwargs.pop("seed", 0), **kwargs)


def make_star(**overrides) -> HookedICTDTransformer:
    return HookedICTDTransformer.from_theta_star(make_cfg(**overrides))


def make_standard(**overrides) -> HookedStandardTransformer:
    return HookedStandardTransformer(
        StandardConfig(**{"d_features": 3, "d_model": 8, "n_layers": 2, "d_mlp": 8, "dtype": "float64", **overrides})
    )


# ---- tiers are folders: ``tests/unit`` (pure functions and single forwards: the inner loop, under a minute on
# one core), ``tests/integration`` (training, optimisation, the CLI, subprocesses, Ray, notebooks, whole reports)
# and ``tests/slow`` (minutes each; with the slow cases of other folders, ``-m slow``). Each test gets its folder's
# marker; a unit test whose code trains, optimises, analyses or runs the CLI, a subprocess, Ray or a notebook is
# refused at collection.
INTEGRATION = re.compile(
    r"\b(main|_cli|train|resume|train_stack|resume_stack|run_study|run_claims|run_benchmark|das|"
    r"analyze|reexport|retrain\w*|write_ood|cell|train_sae|\w*_das\w*)\(|\.step\(\)|subprocess|"
    r"\bray\.|nbclient|notebook|Popen"
)
TIERS = ("unit", "integration", "slow")


def tier_of(source: str) -> str:
    """``integration`` when a test's code (or a fixture it uses) trains, optimises (an optimiser's ``step()``, DAS,
    an SAE), resumes, analyses, runs the CLI, a subprocess, Ray or a notebook; ``unit`` otherwise."""
    return "integration" if INTEGRATION.search(source) else "unit"


def _sources(item) -> str:
    """The test's code, the fixtures of ours it uses, and the helpers of its own module it calls (and theirs)."""
    functions = [item.function] + [
        fixture.func
        for name in item.fixturenames
        for fixture in item._fixtureinfo.name2fixturedefs.get(name, ())
        if fixture.func.__module__.startswith("tests")
    ]
    seen, parts = set(), []
    while functions:
        fn = functions.pop()
        if fn in seen:
            continue
        seen.add(fn)
        source = inspect.getsource(fn)
        parts.append(source)
        called = {
            n.func.id
            for n in ast.walk(ast.parse(textwrap.dedent(source)))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        module = inspect.getmodule(fn)
        functions += [
            getattr(module, name)
            for name in called
            if inspect.isfunction(getattr(module, name, None)) and getattr(module, name).__module__ == module.__name__
        ]
    return "\n".join(parts)


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = item.path.parent.name
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.path}: a test lives in tests/unit, tests/integration or tests/slow")
        item.add_marker(tier)
        if tier == "unit" and tier_of(_sources(item)) != "unit":
            raise pytest.UsageError(
                f"{item.nodeid}: trains, analyses or runs the CLI, a subprocess, Ray or a "
                "notebook; it belongs in tests/integration"
            )
