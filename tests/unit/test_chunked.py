"""Attention over chunks of query positions (``models/chunked_attention.py``) equals the full forward (float64,
1e-12), and is taken only where no hook needs the whole pattern."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.models import chunked_attention as chunked
from tests.conftest import make_cfg, make_standard, make_tasks

TOL = 1e-12


def stylised(form: str, attention: str) -> HookedICTDTransformer:
    model = HookedICTDTransformer(make_cfg(n_layers=2, form=form, attention=attention, init_scale=0.5))
    return model


MODELS = {
    "tsm-softmax": lambda: stylised("tsm", "softmax"),
    "dual-softmax": lambda: stylised("dual", "softmax"),
    "tsm-linear": lambda: stylised("tsm", "linear"),
    "standard": lambda: make_standard(n_heads=2),
}


@pytest.mark.parametrize("kind", list(MODELS))
def test_chunks_of_queries_give_the_full_forward_and_its_gradients(kind, monkeypatch):
    model, prompt = MODELS[kind](), make_tasks(n=21).prompt
    full = model(prompt)
    (grad_full,) = torch.autograd.grad(full[:, -1].sum(), next(model.parameters()))
    monkeypatch.setattr(chunked, "QUERY_CHUNK", 5)  # 22 positions: chunks of 5, 5, 5, 5, 2
    assert chunked.use_chunks(prompt.shape[1], model.blocks[0].attn.hook_pattern)
    values = model(prompt)
    (grad,) = torch.autograd.grad(values[:, -1].sum(), next(model.parameters()))
    assert (values - full).abs().max() <= TOL and (grad - grad_full).abs().max() <= TOL


@pytest.mark.parametrize("kind", ["tsm-softmax", "standard"])
def test_a_hook_on_the_pattern_takes_the_full_forward_and_other_hooks_still_fire(kind, monkeypatch):
    model, prompt = MODELS[kind](), make_tasks(n=21).prompt
    _, full = model.run_with_cache(prompt)
    monkeypatch.setattr(chunked, "QUERY_CHUNK", 5)
    _, cache = model.run_with_cache(prompt)  # every hook cached, the pattern's too: the full forward
    assert cache["pattern", 1].shape[-1] == 22 and (cache["pattern", 1] - full["pattern", 1]).abs().max() == 0
    _, only_z = model.run_with_cache(prompt, names_filter=lambda n: n.endswith("hook_z"))
    assert not chunked.hooked(model.blocks[1].attn.hook_pattern)
    assert (only_z["z", 1] - full["z", 1]).abs().max() <= TOL  # chunked, hook_z fired with every position
    assert chunked.use_chunks(22) and not chunked.use_chunks(5)
