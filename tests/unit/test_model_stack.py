"""Many models in one process: the fast path's model axis, ``ModelStack`` and ``train_stack`` against each model's
own forward and run (float64), resume, refusals, and which study cells are stacked."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.models.stylised.stack import ModelStack
from tests.support.model_stack import SMALL, rel


@pytest.mark.parametrize(
    "form,attention,tied,backward",
    list(itertools.product(["tsm", "dual"], ["softmax", "linear"], [True, False], ["fused", "autograd"])),
)
def test_a_stack_computes_each_models_values_and_gradients_as_the_model_alone(form, attention, tied, backward):
    cfg = ICTDConfig(
        d_features=4,
        n_layers=3,
        tied=tied,
        form=form,
        attention=attention,
        backward=backward,
        dtype="float64",
        init_scale=0.5,
    )
    models = [HookedICTDTransformer(dataclasses.replace(cfg, seed=s)) for s in range(3)]
    prompts = torch.randn(3, 6, 9, cfg.d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for query_only in (True, False):
        stack = ModelStack(models)
        values = stack.fast_values(prompts, query_only=query_only)
        values.pow(2).sum().backward()
        for i, (model, prompt) in enumerate(zip(models, prompts)):
            model.zero_grad()
            alone = model.fast_values(prompt, query_only=query_only)
            alone.pow(2).sum().backward()
            assert rel(values[i].detach(), alone.detach()) < 1e-12
            for u, attn in enumerate(model.unique_attention()):
                assert rel(stack.A.grad[i, u], attn.A.grad) < 1e-12 and rel(stack.V.grad[i, u], attn.V.grad) < 1e-12
                assert (stack.A.grad[i, u][attn.mask_A == 0] == 0).all()  # frozen entries stay frozen


def test_model_i_carries_the_stacks_weights_and_its_hooks_fire():
    cfg = ICTDConfig(d_features=4, n_layers=2, tied=False, dtype="float64")
    stack = ModelStack([HookedICTDTransformer(dataclasses.replace(cfg, seed=s)) for s in range(2)])
    with torch.no_grad():
        stack.A.mul_(1.5)
    prompts = torch.randn(2, 3, 7, cfg.d_model, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    values = stack.fast_values(prompts)
    for i in range(2):
        model = stack.model(i)
        hooked, cache = model.run_with_cache(prompts[i])
        assert rel(hooked, values[i]) < 1e-12 and "blocks.1.attn.hook_pattern" in cache
        assert model.has_any_hook() is False  # run_with_cache's hooks are temporary


def test_a_stack_refuses_what_it_cannot_step_together():
    cfg = ICTDConfig(d_features=4, n_layers=2, dtype="float64")
    with pytest.raises(ValueError, match=r"models\[1\]: its config differs"):
        ModelStack([HookedICTDTransformer(cfg), HookedICTDTransformer(dataclasses.replace(cfg, n_layers=3))])
    with pytest.raises(ValueError, match=r"models\[0\]: mask 'full'"):
        ModelStack([HookedICTDTransformer(dataclasses.replace(cfg, mask="full"))])
    hooked = HookedICTDTransformer(cfg)
    hooked.blocks[0].attn.hook_pattern.add_hook(lambda act, hook: act)
    with pytest.raises(ValueError, match=r"models\[0\]: has hooks registered"):
        ModelStack([hooked])
    with pytest.raises(ValueError, match=r"prompt: expected \[model=1"):
        ModelStack([HookedICTDTransformer(cfg)]).fast_values(torch.zeros(2, 3, 4, cfg.d_model))


def test_studies_stack_cells_of_one_shape_only_at_small_batches():
    from ictd_interp.analyses.studies.grouping import STACK_MAX_TASKS_PER_BATCH, stack_groups
    from ictd_interp.analyses.studies.spec import load_spec

    def units(workers, seeds=(0, 1, 2, 3, 4), grid=None, previous=None, **fixed):
        spec = load_spec(
            {
                "name": "t",
                "preset": "quick",
                "seeds": list(seeds),
                "fixed": {**SMALL, **fixed},
                "grid": grid or {"tied": [True, False]},
            }
        )
        return [[c.name for c in unit] for unit in stack_groups(spec.cells(), workers, previous)]

    assert units(2) == [
        [f"tied-True__seed-{s}" for s in (0, 1, 2, 3, 4)],
        [f"tied-False__seed-{s}" for s in (0, 1, 2, 3, 4)],
    ]
    assert units(4) == [
        ["tied-True__seed-0", "tied-True__seed-1"],
        [f"tied-True__seed-{s}" for s in (2, 3, 4)],
        ["tied-False__seed-0", "tied-False__seed-1"],
        [f"tied-False__seed-{s}" for s in (2, 3, 4)],
    ]
    assert [len(u) for u in units(8)] == [1, 1, 1, 2] * 2  # a unit for every worker
    assert [len(u) for u in units(1, seeds=range(40))] == [20] * 4  # <= 128 tasks per stack at 4 per model
    assert [len(u) for u in units(1, seeds=range(85), grid={"tied": [True]}, tasks_per_batch=3)] == [28, 28, 29]
    # runs that differ in learning rate share a stack (stacked.FREE): one group of 15, a unit per worker
    assert [len(u) for u in units(5, grid={"lr": [1e-3, 2e-3, 3e-3]})] == [3, 3, 3, 3, 3]
    # a started cell keeps its last unit; the rest are split over the workers left
    last = {f"tied-False__seed-{s}": [f"tied-False__seed-{t}" for t in (0, 1, 2, 3)] for s in (0, 1, 2, 3)}
    assert units(4, previous=last) == [
        [f"tied-False__seed-{s}" for s in (0, 1, 2, 3)],
        ["tied-True__seed-0", "tied-True__seed-1"],
        [f"tied-True__seed-{s}" for s in (2, 3, 4)],
        ["tied-False__seed-4"],
    ]
    assert all(len(u) == 1 for u in units(2, tasks_per_batch=STACK_MAX_TASKS_PER_BATCH + 1))
    assert [len(u) for u in units(2, tasks_per_batch=256)] == [1] * 10  # more tasks than a stack may hold
    assert all(len(u) == 1 for u in units(2, grid={"train_depths": ["1:3"]}))
    assert all(len(u) == 1 for u in units(2, grid={"architecture": ["standard"]}))
    # on a GPU a stack wins at every batch: the presets' 64 tasks stack, up to GPU_STACK_TASKS tasks per stack
    assert units(2, tasks_per_batch=64, device="cuda") == units(2, tasks_per_batch=4)
    assert [len(u) for u in units(1, seeds=range(7), grid={"tied": [True]}, tasks_per_batch=20_000, device="cuda")] == [
        2,
        2,
        3,
    ]  # 65,536 // 20,000 = 3 models per stack at most


def test_studies_submit_every_conditions_first_seed_first():
    from ictd_interp.analyses.studies.grouping import seed_major, stack_groups
    from ictd_interp.analyses.studies.spec import load_spec

    spec = load_spec(
        {
            "name": "t",
            "preset": "quick",
            "seeds": [3, 1, 2],
            "fixed": {**SMALL, "tasks_per_batch": 256},  # more tasks than a stack holds: one cell per unit
            "grid": {"tied": [True, False]},
        }
    )
    order = [[c.name for c in unit] for unit in seed_major(stack_groups(spec.cells(), 2))]
    assert order == [[f"tied-{t}__seed-{s}"] for s in (1, 2, 3) for t in (True, False)]
    stacks = seed_major([[c] for c in spec.cells()][:2] + [spec.cells()[2:]])  # a unit sorts by its first cell
    assert [unit[0].name for unit in stacks] == ["tied-True__seed-1", "tied-True__seed-2", "tied-True__seed-3"]
