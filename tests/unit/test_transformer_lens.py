"""TransformerLens's own tools give right answers on the model (float64, stated tolerances)."""

import inspect

import pytest
import torch
from transformer_lens import patching

from ictd_interp import HookedICTDTransformer, hooks
from ictd_interp.analyses.figures.attention_plots import attention_view, position_labels
from tests.conftest import make_cfg, make_star, make_tasks

TOL = 1e-12


def _zero_position_5(act, hook):
    act[:, 5] = 0.0  # in place, as TransformerLens users write hooks
    return act


@pytest.mark.parametrize(
    "name",
    [
        "hook_prompt",
        "blocks.0.hook_resid_pre",
        "blocks.0.attn.hook_k",
        "blocks.1.hook_resid_pre",
        "blocks.0.hook_resid_mid",
    ],
)
@pytest.mark.parametrize("form", ["tsm", "dual"])
def test_in_place_hook_edits_never_leak(name, form):
    """An in-place edit changes only what flows downstream: not the caller's prompt, not the cached
    upstream activations, and the output equals the same edit done out of place."""
    model, tasks = make_star(form=form, n_layers=3), make_tasks()
    prompt = tasks.prompt
    before = prompt.clone()
    in_place = model.run_with_hooks(prompt, fwd_hooks=[(name, _zero_position_5)])
    assert torch.equal(prompt, before) and torch.equal(tasks.prompt, before)

    def out_of_place(act, hook):
        keep = torch.ones_like(act)
        keep[:, 5] = 0.0
        return act * keep

    expected = model.run_with_hooks(prompt, fwd_hooks=[(name, out_of_place)])
    assert (in_place - expected).abs().max() <= TOL
    assert (in_place - model(prompt)).abs().max() > 1e-3  # the edit did something


def test_in_place_edit_does_not_change_cached_upstream_activations():
    """Edits at ``attn_out`` and ``resid_pre`` of the next layer leave what was handed out upstream intact."""
    model, prompt = make_star(n_layers=2), make_tasks().prompt
    _, clean = model.run_with_cache(prompt)
    with model.hooks(fwd_hooks=[("blocks.0.hook_attn_out", _zero_position_5)]):
        _, attn_edit_only = model.run_with_cache(prompt)
    seen = {}

    def save(act, hook):
        seen[hook.name] = act

    model.run_with_hooks(
        prompt,
        fwd_hooks=[
            ("blocks.0.attn.hook_result", save),
            ("blocks.0.hook_attn_out", _zero_position_5),
            ("blocks.0.hook_resid_post", save),
            ("blocks.1.hook_resid_pre", _zero_position_5),
        ],
    )
    assert torch.equal(seen["blocks.0.attn.hook_result"], clean["result", 0])
    assert torch.equal(seen["blocks.0.hook_resid_post"], attn_edit_only["resid_post", 0])
    assert not torch.equal(attn_edit_only["resid_post", 0], clean["resid_post", 0])


def test_tied_model_fires_forward_and_backward_pattern_hooks_on_every_layer():
    model, prompt = HookedICTDTransformer(make_cfg(tied=True, n_layers=4, init_scale=0.5)), make_tasks().prompt
    fired = {"fwd": [], "bwd": []}
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(4)]
    fwd = [(n, lambda act, hook: fired["fwd"].append(hook.name)) for n in names]
    bwd = [(n, lambda grad, hook: fired["bwd"].append(hook.name)) for n in names]
    with model.hooks(fwd_hooks=fwd, bwd_hooks=bwd):
        model(prompt).sum().backward()
    assert sorted(fired["fwd"]) == names and sorted(fired["bwd"]) == names


@pytest.mark.parametrize("form", ["tsm", "dual"])
def test_residual_decompositions_sum_to_the_last_residual(form):
    model = HookedICTDTransformer(make_cfg(form=form, n_layers=3, init_scale=0.5))
    _, cache = model.run_with_cache(make_tasks().prompt)
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels[0] == "embed" and (parts.sum(0) - cache["resid_post", -1]).abs().max() <= TOL
    full = cache.get_full_resid_decomposition(expand_neurons=False)
    assert (full.sum(0) - cache["resid_post", -1]).abs().max() <= TOL
    assert cache.stack_head_results(layer=0).shape[0] == 0  # nothing before layer 0


def test_weights_are_consistent_with_circuits_and_hooks():
    model, prompt = HookedICTDTransformer(make_cfg(form="dual", n_layers=2, init_scale=0.5)), make_tasks().prompt
    _, cache = model.run_with_cache(prompt)
    for l in range(2):
        resid = cache["resid_pre", l]
        assert torch.allclose(cache["q", l], torch.einsum("bpm,hmd->bphd", resid, model.W_Q[l]), atol=TOL)
        assert torch.allclose(cache["k", l], torch.einsum("bpm,hmd->bphd", resid, model.W_K[l]), atol=TOL)
        assert torch.allclose(cache["v", l], torch.einsum("bpm,hmd->bphd", resid, model.W_V[l]), atol=TOL)
        assert torch.allclose(model.QK.AB[l], model.W_Q[l] @ model.W_K[l].transpose(-1, -2), atol=TOL)
        assert torch.allclose(model.OV.AB[l], model.W_V[l] @ model.W_O[l], atol=TOL)
    assert model.accumulated_bias(1).abs().sum() == 0


def test_composition_scores_of_theta_star_by_hand():
    """theta*: OV = V*^T = u e_cur^T, QK = A*^T = diag(I_d, 0, 0, 0). OV QK = u e_cur^T diag(I_d,..) = 0
    (the current row is not a feature row): no Q-composition. OV OV = u (e_cur . u) e_cur^T with
    e_cur . u = -1, so ||OV OV|| / ||OV||^2 = ||u|| / ||u||^2 = 1/sqrt(3)."""
    model = make_star(n_layers=3)
    q, v = model.all_composition_scores("Q"), model.all_composition_scores("V")
    assert q.shape == (3, 1, 3, 1) and q.abs().max() <= TOL
    expected = torch.tensor([[0, 1, 1], [0, 0, 1], [0, 0, 0]], dtype=torch.float64) / 3**0.5
    assert (v[:, 0, :, 0] - expected).abs().max() <= 1e-10
    with pytest.raises(ValueError, match="mode"):
        model.all_composition_scores("X")


def test_cfg_fields_eval_mode_and_device():
    model = make_star()
    assert not model.training and not HookedICTDTransformer(make_cfg()).training
    assert model.cfg.device == "cpu" and model.cfg.n_key_value_heads is None and model.device.type == "cpu"
    assert model.config is model.cfg
    assert model.to("cpu").cfg.device == "cpu"
    assert torch.equal(model.tokens_to_residual_directions(), torch.eye(6, dtype=torch.float64)[model.layout.current])


def test_gradient_attribution_in_one_call():
    model, prompt = make_star(n_layers=2), make_tasks().prompt
    out, cache = model.run_with_cache(prompt, return_type="query_sum", incl_bwd=True)
    assert out.ndim == 0
    # d(prediction)/d(reward row entering the last layer) = the kernel weight K(S_i, S_n) > 0; the
    # query column is never a source, so its reward has no effect
    grad = cache["blocks.1.hook_resid_pre_grad"][..., model.layout.reward]
    assert (grad[:, :-1] > 0).all() and (grad[:, -1] == 0).all()
    assert torch.equal(model(prompt, return_type="query"), model(prompt)[:, -1])
    with pytest.raises(ValueError, match="return_type"):
        model(prompt, return_type="logits")


def patching_inputs(model):
    """Clean prompts, the same with the rewards negated, the clean cache and the mean query value."""
    clean = make_tasks().prompt
    corrupted = clean.clone()
    corrupted[..., model.layout.reward] *= -1.0
    return clean, corrupted, model.run_with_cache(clean)[1], lambda values: values[:, -1].mean()


def test_transformer_lens_patching_through_the_entry_equals_ours():
    model = make_star(n_layers=2)
    clean, corrupted, clean_cache, metric = patching_inputs(model)
    table = hooks.tl_patching(
        patching.get_act_patch_resid_pre, model, corrupted, clean_cache, metric, results_dtype=torch.float64
    )
    assert table.shape == (2, clean.shape[1]) and table.dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32  # restored after the call
    plain = hooks.tl_patching(patching.get_act_patch_resid_pre, model, corrupted, clean_cache, metric)
    assert plain.dtype == torch.float32 and torch.get_default_dtype() == torch.float32  # nothing changed unasked
    ours = hooks.activation_patching(
        model, clean, corrupted, hook_names=["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]
    )
    expected = torch.tensor(ours["value"].to_numpy()).view(2, -1)
    assert (table - expected).abs().max() <= 1e-10
    assert (table[:, -1] - table[:, 0]).abs().max() > 1e-6  # the query position is patched too

    heads = hooks.tl_patching(
        patching.get_act_patch_attn_head_out_all_pos, model, corrupted, clean_cache, metric, results_dtype=torch.float64
    )
    for l in range(2):
        by_hand = model.run_with_hooks(
            corrupted, fwd_hooks=[(f"blocks.{l}.attn.hook_z", lambda act, hook: clean_cache[hook.name])]
        )
        assert abs(heads[l, 0].item() - metric(by_hand).item()) <= 1e-10


def test_every_transformer_lens_patching_function_runs_or_is_refused_by_name():
    model = make_star(n_layers=2)  # the TSM form: its shift is the block's MLP (hook_mlp_out)
    clean, corrupted, clean_cache, metric = patching_inputs(model)
    names = sorted(n for n in dir(patching) if n.startswith("get_act_patch_"))
    direct = [n for n in names if "direct_path" in n]  # TransformerLens 4 adds two direct-path sweeps to 3.9's 18
    assert len(names) - len(direct) >= 18 and len(direct) in (0, 2)
    tables = {}
    for name in names:
        if "direct_path" in name:
            with pytest.raises(ValueError, match=f"{name} is not one of TransformerLens's sweeps"):
                hooks.tl_patching(getattr(patching, name), model, corrupted, clean_cache, metric)
            continue
        tables[name] = hooks.tl_patching(
            getattr(patching, name), model, corrupted, clean_cache, metric, results_dtype=torch.float64
        )
    n_pos, n_heads = clean.shape[1], model.cfg.n_heads
    block = tables["get_act_patch_block_every"]
    assert block.shape == (3, 2, n_pos)
    assert torch.equal(block[0], tables["get_act_patch_resid_pre"])  # each part as run alone
    assert torch.equal(block[2], tables["get_act_patch_mlp_out"])
    heads = tables["get_act_patch_attn_head_all_pos_every"]
    assert heads.shape == (5, 2, n_heads) and torch.equal(heads[4], tables["get_act_patch_attn_head_pattern_all_pos"])
    by_pos = tables["get_act_patch_attn_head_by_pos_every"]
    assert by_pos.shape == (5, 2, n_pos, n_heads)
    assert torch.equal(by_pos[4], tables["get_act_patch_attn_head_pattern_by_pos"].permute(0, 2, 1))
    with pytest.raises(ValueError, match="pass reduce/baseline to its parts"):
        hooks.tl_patching(patching.get_act_patch_block_every, model, corrupted, clean_cache, metric, reduce="none")


def test_the_linear_models_sweeps_run_or_name_the_hook_it_lacks():
    """The predecessor's linear model has no MLP: the sweeps over mlp_out and resid_mid (and the stack holding
    mlp_out) are refused naming the sweep and the hook; every other sweep runs on its 2n + 1 residual columns."""
    from ictd_interp.models.linear.td import linear_model, td0

    clean = make_tasks().prompt.double()
    model = linear_model([td0(clean.shape[-1] - 3)] * 2, gamma=0.9, dtype="float64")
    corrupted = clean.clone()
    corrupted[..., model.layout.reward] *= -1.0
    clean_cache = model.run_with_cache(clean)[1]
    metric = lambda values: values.mean()  # noqa: E731
    lacking = {
        "get_act_patch_mlp_out": "blocks.0.hook_mlp_out",
        "get_act_patch_resid_mid": "blocks.0.hook_resid_mid",
        "get_act_patch_block_every": "blocks.0.hook_mlp_out",
    }
    for name in sorted(n for n in dir(patching) if n.startswith("get_act_patch_") and "direct_path" not in n):
        if name in lacking:
            with pytest.raises(ValueError, match=f"^{name}: HookedLinearICTD has no hook {lacking[name]}"):
                hooks.tl_patching(getattr(patching, name), model, corrupted, clean_cache, metric)
        else:
            table = hooks.tl_patching(getattr(patching, name), model, corrupted, clean_cache, metric)
            assert table.shape[0] in (2, 5) and torch.isfinite(table).all(), name


def test_circuitsvis_view_labels_positions_and_masks_nothing():
    pytest.importorskip("circuitsvis")
    model, prompt = make_star(form="dual"), make_tasks().prompt
    _, cache = model.run_with_cache(prompt)
    html = str(attention_view(cache, layer=1))
    assert "S_12 (query)" in html and "L1H1" in html
    assert "unpkg.com" not in html and "CircuitsVis.render" in html  # the script is inlined, nothing fetched
    assert position_labels(3) == ["S_0", "S_1", "S_2 (query)"]


def test_nnsight_reads_every_layer_pattern_of_a_tied_model():
    nnsight = pytest.importorskip("nnsight")
    model, prompt = HookedICTDTransformer(make_cfg(tied=True, n_layers=3, init_scale=0.5)), make_tasks().prompt
    traced = nnsight.NNsight(model)
    with traced.trace(prompt):  # saved values must be bound one by one inside the trace
        p0 = traced.blocks[0].attn.hook_pattern.output.save()
        p1 = traced.blocks[1].attn.hook_pattern.output.save()
        p2 = traced.blocks[2].attn.hook_pattern.output.save()
    _, cache = model.run_with_cache(prompt)
    for layer, pattern in enumerate((p0, p1, p2)):
        assert torch.equal(pattern.detach(), cache["pattern", layer])


def test_pyvene_zero_intervention_equals_the_transformer_lens_hook():
    pyvene = pytest.importorskip("pyvene")
    model, prompt = make_star(n_layers=3), make_tasks().prompt

    def zero_position_5(base, source=None):
        base[:, 5] = 0.0
        return base

    intervenable = pyvene.IntervenableModel(
        {"component": "blocks[1].hook_resid_pre.output", "intervention": zero_position_5}, model=model
    )
    _, intervened = intervenable(base={"prompt": prompt})
    expected = model.run_with_hooks(prompt, fwd_hooks=[("blocks.1.hook_resid_pre", _zero_position_5)])
    assert (intervened - expected).abs().max() <= TOL
    assert (intervened - model(prompt)).abs().max() > 1e-3


def _standard_model():
    from ictd_interp.config.standard import StandardConfig
    from ictd_interp.models.standard.model import HookedStandardTransformer

    return HookedStandardTransformer(
        StandardConfig(d_features=3, d_model=8, n_heads=2, n_layers=2, d_mlp=8, dtype="float64")
    )


@pytest.mark.parametrize("architecture", ["stylised", "standard"])
def test_patching_works_on_both_architectures_and_the_direct_call_fails_loudly(architecture):
    """TransformerLens's patching through ``ictd_interp.hooks.tl_patching`` gives [layer, pos] on both classes, equal to
    ours; ``reduce="none"`` keeps the batch axis; calling ``get_act_patch_resid_pre`` on the model directly
    (which would sweep d_model 'positions') raises, naming the wrapper."""
    model = make_star(n_layers=2) if architecture == "stylised" else _standard_model()
    clean, corrupted, clean_cache, metric = patching_inputs(model)
    table = hooks.tl_patching(
        patching.get_act_patch_resid_pre, model, corrupted, clean_cache, metric, results_dtype=torch.float64
    )
    assert table.shape == (2, clean.shape[1])
    ours = hooks.activation_patching(
        model, clean, corrupted, hook_names=["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]
    )
    assert (table - torch.tensor(ours["value"].to_numpy()).view(2, -1)).abs().max() <= 1e-10
    if "reduce" not in inspect.signature(patching.generic_activation_patch).parameters:  # TransformerLens 3
        with pytest.raises(ValueError, match="reduce: not an option of TransformerLens 3"):
            hooks.tl_patching(patching.get_act_patch_resid_pre, model, corrupted, clean_cache, metric, reduce="none")
    else:
        per_task = hooks.tl_patching(
            patching.get_act_patch_resid_pre,
            model,
            corrupted,
            clean_cache,
            lambda values: values[:, -1],
            reduce="none",
            results_dtype=torch.float64,
        )
        assert per_task.values.shape == (2, clean.shape[1], len(clean)) and per_task.axis_names == ["layer", "pos"]
        assert (per_task.values.mean(-1) - table).abs().max() <= 1e-10
    with pytest.raises(ValueError, match="no_such_option: not an option of TransformerLens"):
        hooks.tl_patching(patching.get_act_patch_resid_pre, model, corrupted, clean_cache, metric, no_such_option=1)
    with pytest.raises(ValueError, match=r"ictd_interp.hooks.tl_patching.*|sweep d_model"):
        patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric)


@pytest.mark.parametrize("dtype", ["float64", torch.float64])
def test_dtypes_are_taken_as_strings_or_torch_dtypes_and_cfg_follows_the_weights(dtype):
    from ictd_interp.models.standard.model import HookedStandardTransformer

    for cls, name in ((HookedICTDTransformer, "depth3-td-s0"), (HookedStandardTransformer, "standard-quick-s0")):
        model = cls.from_pretrained(name, dtype=dtype)
        assert model.cfg.dtype == "float64" and next(model.parameters()).dtype == torch.float64
        assert model.to(torch.float32).cfg.dtype == "float32"
    cfg = make_cfg(dtype=torch.float32)
    moved = HookedICTDTransformer(cfg).to(torch.float64)
    assert cfg.dtype == "float32" and moved.cfg.dtype == "float64"  # the caller's config is not mutated


@pytest.mark.parametrize("form", ["tsm", "dual"])
def test_full_residual_decomposition_with_its_defaults_sums_to_the_residual(form):
    """``get_full_resid_decomposition()`` as a TransformerLens user calls it (``expand_neurons=True``): the
    TSM is one neuron (activation gamma v(next) - t, W_out = e_target), so heads + neuron + embedding
    add up to the last residual."""
    model, prompt = make_star(n_layers=3, form=form), make_tasks().prompt
    _, cache = model.run_with_cache(prompt)
    stack, labels = cache.get_full_resid_decomposition(return_labels=True)
    assert (stack.sum(0) - cache["resid_post", 2]).abs().max() <= TOL
    assert ("L1N0" in labels) == (form == "tsm")
    if form == "tsm":
        write = cache["blocks.1.hook_mlp_out"]
        assert (cache["blocks.1.mlp.hook_post"][..., 0] - write[..., model.layout.target]).abs().max() == 0


@pytest.mark.parametrize("tied", [False, True])
def test_processed_weights_make_direct_attribution_add_up_to_the_value(tied):
    """After fold_ln + center_writing_weights + fold_value_biases (TransformerLens's semantics) the values
    are unchanged, and decompose_resid(apply_ln=True) @ tokens_to_residual_directions() + b_U equals the
    query's value: the attribution a TransformerLens user computes (before: off by the LayerNorm)."""
    from ictd_interp.config.standard import StandardConfig
    from ictd_interp.models.standard.model import HookedStandardTransformer
    from ictd_interp.models.standard.weights import process_weights_

    cfg = StandardConfig(
        d_features=3, d_model=8, n_heads=2, n_layers=2, d_mlp=8, tied=tied, dtype="float64", init_range=0.5
    )
    model, prompt = HookedStandardTransformer(cfg), make_tasks().prompt
    with torch.no_grad():  # biases and LayerNorm weights far from their defaults, so folding matters
        for name, param in model.named_parameters():
            if name.endswith((".b", ".w", "b_Q", "b_K", "b_V", "b_O", "b_in", "b_out", "b_E", "b_U")):
                param.add_(0.3 * torch.randn_like(param))
    before = model(prompt)

    def attribution(m):
        _, cache = m.run_with_cache(prompt)
        stack = cache.decompose_resid(apply_ln=True, pos_slice=-1)  # [component, batch, d_model]
        return stack.sum(0) @ m.tokens_to_residual_directions() + m.unembed.b_U[0]

    assert (attribution(model) - before[:, -1]).abs().max() > 1e-3  # unprocessed: LayerNorm's w and b missing
    process_weights_(model, fold_ln=True, center_writing_weights=True, fold_value_biases=True)
    assert (model(prompt) - before).abs().max() <= 1e-10
    assert (attribution(model) - before[:, -1]).abs().max() <= 1e-10
    assert model.blocks[0].attn.b_V.abs().max() == 0 and model.blocks[0].attn.W_O.mean(-1).abs().max() <= 1e-12


def test_from_pretrained_processes_the_shipped_standard_model():
    from ictd_interp.models.standard.model import HookedStandardTransformer

    prompt = make_tasks(d=4, n_states=10).prompt
    plain = HookedStandardTransformer.from_pretrained("standard-quick-s0", dtype="float64")
    folded = HookedStandardTransformer.from_pretrained(
        "standard-quick-s0", dtype="float64", fold_ln=True, center_writing_weights=True, fold_value_biases=True
    )
    assert (folded(prompt) - plain(prompt)).abs().max() <= 1e-10
    assert (folded.ln_final.w == 1).all() and (folded.ln_final.b == 0).all()
    star = HookedICTDTransformer.from_pretrained("depth3-td-s0", fold_ln=True)  # nothing to fold: unchanged
    assert torch.equal(star(prompt.float()), HookedICTDTransformer.from_pretrained("depth3-td-s0")(prompt.float()))
