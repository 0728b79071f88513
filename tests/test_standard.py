"""The standard architecture: hook names, its meeting point with the stylised model, and the
analyses that locate the TD circuit (float64, stated tolerances)."""

import math

from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file, save_file

from analyses.metrics.algorithm_id import identify_from_values, identify_layers
from analyses.metrics.heads import head_kernels, head_signatures
from analyses.reports.standard import verdict
from analyses.metrics.site_probes import (probed_values, quantity_probes, quantity_r2, residual_stack,
                                   value_probes)
from hooks.ablation import ablate_target_path
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.io.checkpoint import CheckpointError, save_checkpoint
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.reference.metrics import kernel_diagonality
from ictd_interp.models.standard import HookedStandardTransformer
from ictd_interp.config.standard import StandardConfig
from ictd_interp.training.trainer import resume, train
from ictd_interp.config.train import TrainConfig
from ictd_interp.models import HookedICTDTransformer
from tests.conftest import make_cfg, make_star, make_tasks

TOL = 1e-10


def standard(**overrides) -> HookedStandardTransformer:
    return HookedStandardTransformer(StandardConfig(**{"d_features": 3, "d_model": 8, "n_layers": 2, "d_mlp": 8,
                                                       "dtype": "float64", **overrides}))


def hooked_transformer_names(n_layers: int, mlp: bool, ln: bool, pos: bool) -> set[str]:
    """HookedTransformer's hook names for the parts present, spelled by TransformerLens's get_act_name."""
    names = {get_act_name("embed")} | ({get_act_name("pos_embed")} if pos else set())
    for l in range(n_layers):
        names |= {get_act_name(n, l) for n in ("resid_pre", "attn_out", "resid_post")}
        names |= {get_act_name(n, l, "attn") for n in ("q", "k", "v", "attn_scores", "pattern", "z", "result")}
        if ln:
            names |= {get_act_name(n, l, "ln1") for n in ("scale", "normalized")}
        if mlp:
            names |= {get_act_name("resid_mid", l), get_act_name("mlp_out", l), get_act_name("pre", l),
                      get_act_name("post", l)}
            names |= {get_act_name(n, l, "ln2") for n in ("scale", "normalized")} if ln else set()
    return names | ({"ln_final.hook_scale", "ln_final.hook_normalized"} if ln else set())


@pytest.mark.parametrize("mlp,ln,pos", [(True, True, True), (False, False, False), (True, False, False)])
def test_hook_names_are_hooked_transformers(mlp, ln, pos):
    model = standard(d_mlp=8 if mlp else 0, layer_norm=ln, pos_embed=pos)
    assert set(model.hook_dict) == hooked_transformer_names(2, mlp, ln, pos)
    assert "blocks.1.ln1.hook_normalized" in model.hook_dict or not ln


def embedded_theta_star(n_layers: int = 3, d: int = 3) -> HookedStandardTransformer:
    """θ*'s A and V as QK and OV circuits of a one-head standard model (1/sqrt(d_head) undone),
    identity read-in, the current-value row as read-out, no MLP, no LayerNorm."""
    star = make_star(n_layers=n_layers, d_features=d)
    model = standard(d_features=d, d_model=d + 3, n_heads=1, n_layers=n_layers, d_mlp=0, layer_norm=False)
    eye = torch.eye(d + 3, dtype=torch.float64)
    weights = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    weights["embed.W_E"] = eye.clone()
    weights["unembed.W_U"][star.layout.current, 0] = 1.0
    for l, block in enumerate(star.blocks):
        weights[f"blocks.{l}.attn.W_Q"][0] = block.attn.A[0].T * math.sqrt(d + 3)
        weights[f"blocks.{l}.attn.W_K"][0] = eye
        weights[f"blocks.{l}.attn.W_V"][0] = block.attn.V[0].T
        weights[f"blocks.{l}.attn.W_O"][0] = eye
    model.load_state_dict(weights)
    return model


def test_meets_the_stylised_model_with_its_shift_ablated():
    """TD without bootstrapping, computed by both families: equal layer by layer in float64."""
    star, model, tasks = make_star(n_layers=3), embedded_theta_star(), make_tasks()
    with star.hooks(fwd_hooks=ablate_target_path(star)):
        ablated, ref = star.run_with_cache(tasks.prompt)
    values, cache = model.run_with_cache(tasks.prompt)
    assert (values - ablated).abs().max() <= TOL
    for l in range(3):
        assert (cache["pattern", l] - ref["pattern", l]).abs().max() <= TOL
        assert (
            cache["resid_post", l][..., star.layout.current] - ref["resid_mid", l][..., star.layout.current]
        ).abs().max() <= TOL
    assert (values - star(tasks.prompt)).abs().max() > 1e-2  # bootstrapping does change the answer


def test_value_probes_recover_the_stored_row_on_theta_star():
    star, fit, held_out = make_star(n_layers=3), make_tasks(n_tasks=32, seed=1), make_tasks(n_tasks=8, seed=2)
    stored = value_probes(star, fit, "stored")
    rows = residual_stack(star, held_out.prompt)[..., star.layout.current]
    assert (probed_values(star, stored, held_out) - rows).abs().max() <= TOL
    e_current = torch.zeros(star.cfg.d_model, dtype=torch.float64)
    e_current[star.layout.current] = 1.0
    for site in range(1, 4):
        assert (stored.weights[site] - e_current).abs().max() <= 1e-8
    output = value_probes(star, fit, "output")  # tuned-lens target: exact at the last site
    assert (probed_values(star, output, held_out)[-1] - star(held_out.prompt)).abs().max() <= TOL
    with pytest.raises(ValueError, match="stored"):
        value_probes(standard(), fit, "stored")


def test_probed_identification_equals_the_row_identification():
    star, tasks = make_star(n_layers=3), make_tasks(n_tasks=16)
    probed = identify_from_values(probed_values(star, value_probes(star, tasks, "stored"), tasks), tasks)
    rows = identify_layers(star, tasks)
    for a, b in zip(probed, rows):
        assert a.step == pytest.approx(b.step, abs=1e-6)
        assert a.effective_discount == pytest.approx(b.effective_discount or 0, abs=1e-6) or b.b is None
    assert rows[1].effective_discount == pytest.approx(0.9, abs=1e-6)


def test_reward_is_linearly_present_at_every_site_of_theta_star():
    star = make_star(n_layers=2)
    r2 = quantity_r2(star, quantity_probes(star, make_tasks(n_tasks=32, seed=1)), make_tasks(n_tasks=8, seed=2))
    assert all(v == pytest.approx(1.0, abs=1e-10) for v in r2["reward"])
    assert r2["v_current"][0] < 0.99  # site 0 holds no values: only what the features predict


def test_head_kernels_theta_star_and_uniform_attention():
    star, tasks = make_star(n_layers=2), make_tasks()
    rows = head_kernels(star, tasks)
    assert all(r.td_kernel_correlation == pytest.approx(1.0, abs=1e-12) for r in rows)
    _, cache = star.run_with_cache(tasks.prompt)
    diag = kernel_diagonality(cache["pattern", 0][:, 0], tasks.states, tasks.mrp.n_states).mean().item()
    assert rows[0].diagonality == pytest.approx(diag, abs=1e-12)
    uniform = standard(n_heads=1)  # W_Q = 0: every target spreads its attention evenly over the sources
    with torch.no_grad():
        uniform.blocks[0].attn.W_Q.zero_()
    row = head_kernels(uniform, tasks)[0]
    assert row.td_kernel_correlation == 0.0
    # by hand: under even attention a state's own mass is the share of the 12 sources in that state,
    # averaged over the states the prompt visits
    per_task = []
    for states in tasks.states.tolist():
        per_task.append(sum(states[:-1].count(s) / 12 for s in set(states)) / len(set(states)))
    assert row.diagonality == pytest.approx(sum(per_task) / len(per_task), abs=1e-12)


def test_signature_is_td_on_theta_star_in_both_families():
    tasks, star, embedded = make_tasks(), make_star(n_layers=3), embedded_theta_star()
    rows = {}
    for name in ("reward", "v_next", "v_current"):
        rows[name] = torch.zeros(6, dtype=torch.float64)
    rows["reward"][star.layout.reward], rows["v_next"][star.layout.target] = 1.0, 1.0
    rows["v_current"][star.layout.current] = 1.0
    for model in (star, embedded):
        for layer in (0, 2):
            (sig,) = head_signatures(model, tasks, layer, rows, rows["v_current"])
            assert sig.normalised == pytest.approx([1.0, 1.0, -1.0], abs=1e-12) and sig.matches_td
            assert sig.raw[0] == pytest.approx(13.0, abs=1e-9)  # 13 positions x pattern rows summing to 1


def test_verdict_sentences():
    from analyses.metrics.algorithm_id import LayerReading
    from analyses.metrics.heads import HeadKernel, Signature
    from analyses.summary.sections import Algorithm, Circuit

    fit = dict(source="fit", step=1.0, b=0.9, c=-1.0, effective_discount=0.9, current_weight=-1.0, beta=1.0,
               identifiable=True)
    alg = Algorithm(layers=[LayerReading(layer=0, in_family=True, fve=0.97, **fit),
                            LayerReading(layer=1, in_family=False, fve=0.3, **fit)])
    circuit = Circuit(max_td_kernel_correlation=0.8, max_tabular_kernel_correlation=0.0,
                      heads=[HeadKernel(layer=0, head=1, td_kernel_correlation=0.8, diagonality=0.5)],
                      signatures=[Signature(layer=0, head=1, raw=[1, 0.5, -0.7], normalised=[1, 0.5, -0.7],
                                            matches_td=True)],
                      layer_signatures=[Signature(layer=0, raw=[1, 1, 1], normalised=[1, 1, 1], matches_td=False)])
    assert verdict(circuit, alg).startswith("Yes, in part: layer 0 head 1")
    circuit.signatures[0].matches_td = False
    assert "no head or layer moves the value" in verdict(circuit, alg) and "at most 97%" in verdict(circuit, alg)
    circuit.heads[0].tabular_kernel_correlation = 0.95
    assert "correlation 0.95 with the tabular kernel, 0.80 with θ*'s softmax kernel" in verdict(circuit, alg)
    circuit.layer_signatures[0].matches_td = True  # the head's layer moves it, through its MLP
    assert verdict(circuit, alg).startswith("Yes, in part")
    circuit.layer_signatures[0].matches_td = False
    circuit.heads[0].td_kernel_correlation = 0.2
    assert verdict(circuit, alg).startswith("No TD circuit found")


def test_settings_of_the_other_architecture_are_refused():
    with pytest.raises(ValueError, match="attention: not a setting of the standard"):
        TrainConfig.from_flat(architecture="standard", attention="linear")
    with pytest.raises(ValueError, match="d_model: not a setting of the stylised"):
        TrainConfig.from_flat(d_model=64)
    with pytest.raises(ValueError, match="d_head"):
        StandardConfig(d_features=3, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="n_ctx"):
        standard(pos_embed=True, n_ctx=8)(make_tasks().prompt)


def tiny(**overrides) -> TrainConfig:
    return TrainConfig.from_flat(
        **{
            "architecture": "standard",
            "d_model": 8,
            "d_mlp": 8,
            "n_states": 5,
            "context_len": 6,
            "tasks_per_batch": 4,
            "windows_per_task": 2,
            "steps": 4,
            "n_eval_tasks": 8,
            "eval_every": 2,
            "checkpoint_every": 2,
            "init_range": 0.1,
            "dtype": "float64",
            **overrides,
        }
    )


def test_training_resumes_bit_exact_and_checkpoints_check_ties(tmp_path):
    full = train(tiny(tied=True), tmp_path / "full", progress=False)
    train(tiny(tied=True, steps=2), tmp_path / "part", progress=False)
    config = (tmp_path / "part" / "train_config.json")
    config.write_text(config.read_text().replace('"steps": 2', '"steps": 4'))
    resumed = resume(tmp_path / "part", progress=False)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    ckpt = save_checkpoint(full.model, tmp_path / "ckpt")
    assert torch.equal(load_checkpoint(ckpt).model(make_tasks(d=4).prompt), full.model(make_tasks(d=4).prompt))
    weights = load_file(str(ckpt / "model.safetensors"))
    weights["blocks.1.attn.W_Q"] += 1.0  # a file whose layers disagree although its config says tied
    save_file(weights, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError, match="tied"):
        load_checkpoint(ckpt)


def test_transformer_lens_decomposition_sums_to_the_residual():
    model, tasks = standard(layer_norm=False), make_tasks()
    _, cache = model.run_with_cache(tasks.prompt)
    parts = cache.decompose_resid(return_labels=False)
    assert (parts.sum(0) - cache["resid_post", -1]).abs().max() <= 1e-12
    assert model.all_composition_scores("V").shape == (2, 2, 2, 2)


def test_tabular_kernel_correlation_is_one_for_a_same_state_head():
    tasks = make_tasks()
    from analyses.metrics.heads import correlation, tabular_kernel

    K = tabular_kernel(tasks)
    assert torch.allclose(K.sum(-1), torch.ones(4, 13, dtype=torch.float64), atol=1e-12)
    s = tasks.states
    assert K[0, 3, 0] == ((s[0, :-1] == s[0, 3]).sum() > 0) * (s[0, 0] == s[0, 3]) / max(
        int((s[0, :-1] == s[0, 3]).sum()), 1
    )
    assert correlation(K, K) == pytest.approx(1.0, abs=1e-12)


def test_layer_signature_is_td_on_theta_star_and_sees_through_an_mlp():
    from analyses.metrics.heads import layer_signature

    tasks, star = make_tasks(), make_star(n_layers=3)
    rows = {name: torch.zeros(6, dtype=torch.float64) for name in ("reward", "v_next", "v_current")}
    rows["reward"][star.layout.reward], rows["v_next"][star.layout.target] = 1.0, 1.0
    rows["v_current"][star.layout.current] = 1.0
    for layer in (0, 2):
        sig = layer_signature(star, tasks, layer, rows, rows["v_current"], rows["v_current"])
        assert sig.raw == pytest.approx([13.0, 13.0, -13.0], abs=1e-9) and sig.matches_td
    # a standard model whose update flows only through its MLP: the head's direct effect on the read-out
    # is zero, the layer's update is not
    model = standard(d_model=6, n_heads=1, n_layers=1, d_mlp=4, layer_norm=False)
    with torch.no_grad():
        model.blocks[0].mlp.W_out[:, star.layout.current] = 0.0
        model.blocks[0].attn.W_O[..., star.layout.current] = 0.0
        model.blocks[0].mlp.W_out[0, star.layout.current] = 1.0
    (head,) = head_signatures(model, tasks, 0, rows, rows["v_current"])
    assert head.raw == [0.0, 0.0, 0.0]
    whole = layer_signature(model, tasks, 0, rows, rows["v_current"], rows["v_current"])
    assert any(abs(g) > 1e-6 for g in whole.raw)


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
    from analyses.metrics.extrapolation import depth_extrapolation, msve_at_depth
    from ictd_interp.training.evaluation import msve

    model, tasks = standard(tied=True, n_layers=2), make_tasks()
    assert msve_at_depth(model, tasks, 2) == pytest.approx(msve(model, tasks), abs=1e-12)
    deeper = standard(tied=True, n_layers=5)
    deeper.load_state_dict(_tile(model.state_dict(), 5))
    assert msve_at_depth(model, tasks, 5) == pytest.approx(msve(deeper, tasks), abs=1e-12)
    result = depth_extrapolation(model, make_star(n_layers=2), tasks, factor=2)
    assert result.depths == [1, 2, 3, 4] and len(result.model) == 4
    single = standard(tied=True, n_layers=2, dtype="float32")  # float32 weights, float64 task prompts
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
    model = {"stylised": lambda: HookedICTDTransformer(make_cfg(n_layers=3, init_scale=0.3, tied=False)),
             "standard": lambda: standard(), "standard-tied": lambda: standard(tied=True),
             "standard-bare": lambda: standard(d_mlp=0, layer_norm=False, pos_embed=True, n_ctx=40)}[kind]()
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


def test_analyze_and_evaluate_take_a_standard_model(tmp_path):
    import json

    from ictd_interp.cli import main

    out = tmp_path / "ev"
    assert main(["evaluate", "standard-quick-s0", "--env", "loop", "--n-tasks", "4", "--context-len", "16",
                 "--depth", "4", "--out", str(out)]) == 0
    result = json.loads((out / "evaluation.json").read_text())
    assert "model" not in result["depth"] and len(result["depth"]["theta_star"]) == 5  # no stored per-layer values
    assert result["context"]["model"][-1] > 0 and (out / "error_vs_context.png").exists()


def test_reproduce_a_tiny_standard_run_writes_the_circuit_report(tmp_path):
    import json

    from ictd_interp.cli import main

    args = ["reproduce", "--preset", "standard-quick", "--out", str(tmp_path), "--steps", "2", "--tasks-per-batch", "4",
            "--windows-per-task", "2", "--n-eval-tasks", "16", "--eval-every", "1", "--d-model", "8", "--d-mlp", "8"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert summary["architecture"] == "standard" and len(summary["circuit"]["heads"]) == 3 * 2
    assert len(summary["convergence"]["depth"]["model"]) == 4  # embedding + 3 blocks, read by the value probe
    text = (tmp_path / "analysis" / "summary.md").read_text()
    assert "**Verdict.**" in text and f"{summary['metrics']['eval_msve']:.4f}" in text
    for name in ("error_vs_depth", "td_quantities", "head_td_kernel", "head_signature", "layer_signature"):
        assert (tmp_path / "analysis" / "figures" / f"{name}.png").stat().st_size > 0


@pytest.mark.parametrize("kind", ["default", "tied", "bare"])
def test_the_hook_free_path_has_the_hooked_forwards_gradients(kind):
    """The hook-free path (its own projections, query-only vectors and layouts): its gradients, full
    and query-only, and the NEU objective's second-order gradient equal the hooked forward's in float64
    (1e-12 relative to the largest)."""
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.batches import window_batch
    from ictd_interp.training.objectives import neu_loss

    model = {"default": lambda: standard(), "tied": lambda: standard(tied=True),
             "bare": lambda: standard(d_mlp=0, layer_norm=False, pos_embed=True, n_ctx=40)}[kind]()
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
    assert [standard(d_model=8, n_heads=1, d_head=e).blocks[0].attn.fold_scale for e in (1, 2, 4, 8, 16, 32, 64)] == \
        [True, False, True, False, True, False, True]
    model = standard(d_model=32, n_heads=2, dtype="float32")
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
    unfolded = standard(d_model=16, n_heads=2)
    assert not unfolded.blocks[0].attn.fold_scale
    with torch.no_grad():
        slow = unfolded(make_tasks().prompt)
        assert torch.allclose(unfolded.fast_values(make_tasks().prompt), slow, atol=1e-12, rtol=0)
