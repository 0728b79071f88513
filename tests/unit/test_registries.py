"""One registry per kind of plug-in, and what is registered is the list: validation, the CLI's help, the sampler,
the trainer and the docs read MRP families and objectives from ``ictd_interp.config.registry`` and methods from
``ictd_interp.analyses.methods_benchmark.methods.METHODS``."""

from pathlib import Path

import pytest
import torch

from ictd_interp.config import TaskDistribution, TrainConfig
from ictd_interp.config.registry import FAMILIES, OBJECTIVES, Family, Objective, listing, load, markdown, register
from ictd_interp.tasks.sampling import family_mrps
from ictd_interp.training import objectives

ROOT = Path(__file__).parents[2]


def test_the_guide_shows_the_registered_families_and_objectives():
    guide = (ROOT / "docs" / "guide.md").read_text()
    for table in (FAMILIES, OBJECTIVES):
        assert "\n".join(markdown(table)) in guide


def test_the_benchmark_docs_name_every_built_in_method():
    from ictd_interp.analyses.methods_benchmark.methods import METHODS

    docs = (ROOT / "docs" / "methods_benchmark.md").read_text()
    built_in = [
        name for name, m in METHODS.items() if m.run.__module__.startswith("ictd_interp.analyses.methods_benchmark")
    ]
    assert "activation-patching-signed" in built_in and [m for m in built_in if f"`{m}`" not in docs] == []


def test_help_texts_list_the_registry():
    from ictd_interp.analyses.commands.configs import EvaluateConfig
    from ictd_interp.cli.args import field_help

    assert listing(FAMILIES) in field_help(TaskDistribution)["family"]
    assert listing(FAMILIES) in field_help(EvaluateConfig)["env"]
    assert listing(OBJECTIVES) in field_help(TrainConfig)["objective"]
    assert "mdp-chain (" in listing(FAMILIES) and "supervised-q-star (" in listing(OBJECTIVES)


def test_validation_reads_the_registry(monkeypatch):
    with pytest.raises(ValueError, match=r"family: must be one of \('boyan', 'loop'.*'mdp-chain'\)"):
        TaskDistribution(family="users-family")
    assert TaskDistribution(family="mdp-chain", n_states=4).n_actions == 2
    assert TaskDistribution(family="loop").n_actions is None
    own = Family("users-family", "a user's own family", "ictd_interp.tasks.families:loop", min_states=3)
    monkeypatch.setitem(FAMILIES, "users-family", own)  # what register does, undone after the test
    mine = TaskDistribution(family="users-family", n_states=5)  # registered: accepted and sampled
    assert family_mrps(mine, 3, torch.Generator().manual_seed(0)).P.shape == (3, 5, 5)
    with pytest.raises(ValueError, match="n_states: the users-family family needs at least 3 states, got 2"):
        TaskDistribution(family="users-family", n_states=2)
    # every task option through the registry: a finite pool and the shuffled-reward null on the new family
    from ictd_interp.training.batch_stream import BatchStream

    config = TrainConfig.from_preset("quick", family="users-family", task_pool=2, shuffle_rewards=True)
    batch, _ = next(BatchStream(config, torch.Generator().manual_seed(0), torch.float64))
    assert batch.prompts.shape[0] == config.tasks_per_batch * (config.windows_per_task + 1)
    with pytest.raises(
        ValueError,
        match="'q-learning' learns action values: it needs a control family "
        r"\(--family mdp-random or mdp-chain\)",
    ):
        TrainConfig.from_preset("quick", objective="q-learning")


def test_every_entry_loads_and_a_taken_name_is_refused(monkeypatch):
    for entry in FAMILIES.values():
        assert callable(load(entry.make))
    got = {name: objectives.objective(name).loss_fn for name in OBJECTIVES}
    assert got == {name: load(e.loss) for name, e in OBJECTIVES.items()}
    late = Objective("late", "registered after the trainer's import", "ictd_interp.training.objectives:mc_loss", True)
    monkeypatch.setitem(OBJECTIVES, "late", late)  # what register does, undone after the test
    assert objectives.objective("late").loss_fn is objectives.mc_loss and objectives.objective("late").needs_returns
    with pytest.raises(ValueError, match="'boyan': already registered"):
        register(Family("boyan", "again", "ictd_interp.tasks.families:boyan"))


def test_a_budget_or_config_that_names_an_unregistered_objective_is_refused():
    from dataclasses import replace

    from ictd_interp.analyses.claims.budget import BUDGETS

    with pytest.raises(ValueError, match=r"objectives: \['xx'\] not registered"):
        replace(BUDGETS["quick"], objectives=("td", "xx"))
    with pytest.raises(ValueError, match="mc_horizon: the mc objective needs a horizon >= 1"):
        TrainConfig.from_preset("quick", objective="mc", mc_horizon=0)


def test_only_boyan_chains_draw_split_so_no_family_is_silently_built_as_one():
    """``split_draws`` means ``draw_tasks``' Boyan-chain uniforms: another maker with it would be trained on Boyan
    chains, so it is refused, naming the maker."""
    with pytest.raises(ValueError, match="family 'mine': split_draws builds Boyan chains .* made by .*:loop"):
        Family("mine", "a loop claiming split draws", "ictd_interp.tasks.families:loop", split_draws=True)
    assert FAMILIES["boyan"].split_draws and not any(f.split_draws for n, f in FAMILIES.items() if n != "boyan")
