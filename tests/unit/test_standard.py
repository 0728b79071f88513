"""The standard architecture: hook names, configs, training and resuming, the TransformerLens surface and the
hook-free fast path (float64, stated tolerances). The analyses that read its circuit: test_standard_circuits.py."""

from dataclasses import replace

import pytest
import torch

from ictd_interp.config.standard import StandardConfig
from ictd_interp.config.train import TrainConfig
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import get_act_name
from tests.conftest import make_cfg, make_standard, make_star, make_tasks


def hooked_transformer_names(n_layers: int, mlp: bool, ln: bool, pos: bool) -> set[str]:
    """HookedTransformer's hook names for the parts present, spelled by TransformerLens's get_act_name."""
    names = {get_act_name("embed")} | ({get_act_name("pos_embed")} if pos else set())
    for l in range(n_layers):
        names |= {get_act_name(n, l) for n in ("resid_pre", "attn_out", "resid_post")}
        names |= {get_act_name(n, l, "attn") for n in ("q", "k", "v", "attn_scores", "pattern", "z", "result")}
        if ln:
            names |= {get_act_name(n, l, "ln1") for n in ("scale", "normalized")}
        if mlp:
            names |= {
                get_act_name("resid_mid", l),
                get_act_name("mlp_out", l),
                get_act_name("pre", l),
                get_act_name("post", l),
            }
            names |= {get_act_name(n, l, "ln2") for n in ("scale", "normalized")} if ln else set()
    return names | ({"ln_final.hook_scale", "ln_final.hook_normalized"} if ln else set())


@pytest.mark.parametrize("mlp,ln,pos", [(True, True, True), (False, False, False), (True, False, False)])
def test_hook_names_are_hooked_transformers(mlp, ln, pos):
    model = make_standard(d_mlp=8 if mlp else 0, layer_norm=ln, pos_embed=pos)
    assert set(model.hook_dict) == hooked_transformer_names(2, mlp, ln, pos)
    assert "blocks.1.ln1.hook_normalized" in model.hook_dict or not ln


def test_settings_of_the_other_architecture_are_refused():
    with pytest.raises(ValueError, match="attention: not a setting of the standard"):
        TrainConfig.from_flat(architecture="standard", attention="linear")
    with pytest.raises(ValueError, match="d_model: not a setting of the stylised"):
        TrainConfig.from_flat(d_model=64)
    with pytest.raises(ValueError, match="d_head"):
        StandardConfig(d_features=3, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="n_ctx"):
        make_standard(pos_embed=True, n_ctx=8)(make_tasks().prompt)


def test_transformer_lens_decomposition_sums_to_the_residual():
    model, tasks = make_standard(layer_norm=False), make_tasks()
    _, cache = model.run_with_cache(tasks.prompt)
    parts = cache.decompose_resid(return_labels=False)
    assert (parts.sum(0) - cache["resid_post", -1]).abs().max() <= 1e-12
    assert model.all_composition_scores("V").shape == (2, 2, 2, 2)


@pytest.mark.parametrize("architecture", ["stylised", "standard"])
def test_flat_settings_reach_the_nested_config_that_holds_them(architecture):
    own = {"init_scale": 0.2} if architecture == "stylised" else {"init_range": 0.2, "d_model": 8}
    cfg = TrainConfig.from_flat(architecture=architecture, n_layers=2, tied=True, seed=4, gamma=0.8, **own)
    assert cfg.model.architecture == architecture and (cfg.model.n_layers, cfg.model.tied) == (2, True)
    assert cfg.seed == cfg.model.seed == 4 and cfg.model.gamma == cfg.tasks.gamma == 0.8  # shared settings: both
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    other = {"init_range": 0.2} if architecture == "stylised" else {"mask": "full"}
    with pytest.raises(ValueError, match=f"not a setting of the {architecture} architecture"):
        cfg.with_flat(**other)
    with pytest.raises(ValueError, match="the model has 4, the tasks 5"):
        TrainConfig(model=cfg.model, tasks=replace(cfg.tasks, d_features=5))


def test_a_tied_standard_block_runs_to_any_depth():
    from ictd_interp.analyses.metrics.extrapolation import depth_extrapolation, msve_at_depth
    from ictd_interp.training.evaluation import msve

    model, tasks = make_standard(tied=True, n_layers=2), make_tasks()
    assert msve_at_depth(model, tasks, 2) == pytest.approx(msve(model, tasks), abs=1e-12)
    deeper = make_standard(tied=True, n_layers=5)
    deeper.load_state_dict(_tile(model.state_dict(), 5))
    assert msve_at_depth(model, tasks, 5) == pytest.approx(msve(deeper, tasks), abs=1e-12)
    result = depth_extrapolation(model, make_star(n_layers=2), tasks, factor=2)
    assert result.depths == [1, 2, 3, 4] and len(result.model) == 4
    single = make_standard(tied=True, n_layers=2, dtype="float32")  # float32 weights, float64 task prompts
    assert msve_at_depth(single, tasks, 2) == pytest.approx(msve(single, tasks), abs=1e-12)


def _tile(state: dict, depth: int) -> dict:
    """A tied model's weights for ``depth`` blocks (every block is block 0)."""
    shared = {k.split(".", 2)[2]: v for k, v in state.items() if k.startswith("blocks.0.")}
    out = {k: v for k, v in state.items() if not k.startswith("blocks.")}
    out.update({f"blocks.{l}.{name}": v for l in range(depth) for name, v in shared.items()})
    return out


@pytest.mark.parametrize("kind", ["stylised", "standard", "standard-tied", "standard-bare"])
def test_both_model_classes_keep_the_analysis_protocol(kind):
    """What the function-space analyses rely on, by behaviour (not by method names): the fast path equals the
    hooked forward at every depth, the read-out direction reads the value off the last residual stream, the
    frozen entries are zero and the tied groups hold equal tensors."""
    model = {
        "stylised": lambda: HookedICTDTransformer(make_cfg(n_layers=3, init_scale=0.3, tied=False)),
        "standard": lambda: make_standard(),
        "standard-tied": lambda: make_standard(tied=True),
        "standard-bare": lambda: make_standard(d_mlp=0, layer_norm=False, pos_embed=True, n_ctx=40),
    }[kind]()
    prompt = make_tasks().prompt
    values = model(prompt)
    assert values.shape == prompt.shape[:2] and model.cfg.architecture in ("stylised", "standard")
    assert torch.allclose(model.fast_values(prompt), values, atol=1e-12, rtol=0)
    assert torch.allclose(model.fast_values(prompt, query_only=True), values[:, -1], atol=1e-12, rtol=0)
    last = model(prompt, stop_at_layer=model.cfg.n_layers)
    if kind == "stylised":  # the residual stream is the prompt: the value row is read as it is
        assert torch.equal(last[..., model.readout_direction().argmax()], values)
    state = model.state_dict()
    for name, frozen in model.frozen_entries().items():
        assert (state[name][frozen] == 0).all(), name
    for group in model.tied_parameters():
        assert all(torch.equal(state[group[0]], state[n]) for n in group[1:]), group
    if model.cfg.tied:
        deeper = model.fast_values(prompt, depth=model.cfg.n_layers + 2)
        assert deeper.shape == values.shape and not torch.allclose(deeper, values)
        assert torch.allclose(deeper, model.values_at_depth(prompt, model.cfg.n_layers + 2), atol=1e-12, rtol=0)
        query = model.fast_values(prompt, depth=model.cfg.n_layers + 2, query_only=True)
        assert torch.allclose(query, deeper[:, -1], atol=1e-12, rtol=0)


@pytest.mark.parametrize("kind", ["default", "tied", "bare"])
def test_the_hook_free_path_has_the_hooked_forwards_gradients(kind):
    """The hook-free path (its own projections, query-only vectors and layouts): its gradients, full
    and query-only, and the NEU objective's second-order gradient equal the hooked forward's in float64
    (1e-12 relative to the largest)."""
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.batches import window_batch
    from ictd_interp.training.objectives import neu_loss

    model = {
        "default": lambda: make_standard(),
        "tied": lambda: make_standard(tied=True),
        "bare": lambda: make_standard(d_mlp=0, layer_norm=False, pos_embed=True, n_ctx=40),
    }[kind]()
    params = [p for p in model.parameters() if p.requires_grad]
    prompt = make_tasks().prompt
    weights = torch.randn(prompt.shape[:2], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for query_only in (False, True):
        fast = model.fast_values(prompt, query_only=query_only)
        with model.hooks(fwd_hooks=[("hook_embed", lambda act, hook: act)]):  # a hook: the hooked forward runs
            slow = model.fast_values(prompt, query_only=query_only)
        w = weights[:, -1] if query_only else weights
        g_fast, g_slow = (torch.autograd.grad((v * w).sum(), params) for v in (fast, slow))
        scale = max(g.abs().max().item() for g in g_slow)
        assert scale > 1e-3 and max((a - b).abs().max().item() for a, b in zip(g_fast, g_slow)) < 1e-12 * scale
    config = TrainConfig.from_preset("quick", dtype="float64", d_features=3, context_len=12)
    batch = window_batch(config.tasks, 4, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    g_fast = torch.autograd.grad(neu_loss(model, batch), params)
    with model.hooks(fwd_hooks=[("hook_embed", lambda act, hook: act)]):
        g_slow = torch.autograd.grad(neu_loss(model, batch), params)
    scale = max(g.abs().max().item() for g in g_slow)
    assert scale > 0 and max((a - b).abs().max().item() for a, b in zip(g_fast, g_slow)) < 1e-12 * scale


def test_the_query_scale_is_folded_into_W_Q_only_where_that_is_exact():
    """``fold_scale`` exactly when sqrt(d_head) is a power of two; folded, the fast path's loss and every
    gradient are bit for bit the unfolded ones (float32, standard-quick's d_head 16); unfolded (d_head 8)
    the fast path still meets the hooked forward (float64, 1e-12)."""
    folds = [make_standard(d_model=8, n_heads=1, d_head=e).blocks[0].attn.fold_scale for e in (1, 2, 4, 8, 16, 32, 64)]
    assert folds == [True, False, True, False, True, False, True]
    model = make_standard(d_model=32, n_heads=2, dtype="float32")
    params = list(model.parameters())
    prompt = make_tasks().prompt.float()
    weights = torch.randn(prompt.shape[0], generator=torch.Generator().manual_seed(1))
    grads = []
    for fold in (True, False):
        for block in model.blocks:
            block.attn.fold_scale = fold
        values = model.fast_values(prompt, query_only=True)
        grads.append([values, *torch.autograd.grad((values * weights).sum(), params)])
    assert all(torch.equal(a, b) for a, b in zip(*grads)) and grads[0][0].abs().max() > 0
    unfolded = make_standard(d_model=16, n_heads=2)
    assert not unfolded.blocks[0].attn.fold_scale
    with torch.no_grad():
        slow = unfolded(make_tasks().prompt)
        assert torch.allclose(unfolded.fast_values(make_tasks().prompt), slow, atol=1e-12, rtol=0)


@pytest.mark.parametrize("pos_embed", [False, True])
def test_without_positional_embeddings_the_context_is_an_unordered_set(pos_embed):
    """No positional embedding and no shift: reordering the context's columns (the query kept last) reorders the
    outputs and nothing else, in float64 to rounding, so such a model cannot see which state follows which (the
    report says so). A learned positional embedding breaks the symmetry."""
    model = make_standard(pos_embed=pos_embed, n_ctx=13)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    prompt = make_tasks(n_tasks=3, n=12).prompt.double()
    order = torch.cat([torch.randperm(12, generator=torch.Generator().manual_seed(1)), torch.tensor([12])])
    with torch.no_grad():
        gap = (model(prompt[:, order]) - model(prompt)[:, order]).abs().max().item()
    assert gap > 1e-3 if pos_embed else gap < 1e-12
