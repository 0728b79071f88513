"""The hooked model against the reference algorithms (tracr style: layer by layer, stated tolerances)."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from tests.conftest import make_cfg, make_tasks


@pytest.mark.parametrize("form", ["tsm", "dual"])
def test_frozen_entries_stay_exactly_zero_under_training(form):
    cfg = make_cfg(form=form, init_scale=0.5)
    model = HookedICTDTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    tasks = make_tasks()
    for _ in range(5):
        opt.zero_grad()
        model(tasks.prompt).pow(2).mean().backward()
        opt.step()
    for block in model.blocks:
        assert (block.attn.A[block.attn.mask_A == 0] == 0).all()
        assert (block.attn.V[block.attn.mask_V == 0] == 0).all()
        assert (block.attn.V[block.attn.mask_V == 1] != 0).any()
