"""The hooked model against the reference algorithms (tracr style: layer by layer, stated tolerances)."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig, linear_td, softmax_td, tabular_td
from ictd_interp.tasks.sampling import sample_tasks
from tests.conftest import make_cfg, make_star, make_tasks

EXACT = 1e-10  # float64; theta* is exact, only rounding differs


@pytest.mark.parametrize("form", ["tsm", "dual"])
@pytest.mark.parametrize("n", [5, 30, 100])
@pytest.mark.parametrize("scale", [0.5, 2.0, 5.0])
def test_theorem1_every_layer_is_a_softmax_td_iterate(form, n, scale):
    for seed in range(2):
        tasks = sample_tasks(3, 8, 4, n, 0.9, feature_scale=scale, seed=seed)
        model = HookedICTDTransformer.from_theta_star(make_cfg(d_features=4, n_layers=10, form=form))
        _, cache = model.run_with_cache(tasks.prompt)
        ref = softmax_td(tasks.x, tasks.rewards, 0.9, 10)
        for layer in range(10):
            got = cache["resid_post", layer][..., model.layout.current]
            assert (got - ref[:, layer + 1]).abs().max() <= EXACT, (layer, seed)


def test_dual_and_tsm_agree_on_every_residual():
    tasks = make_tasks(n=20)
    caches = [make_star(form=f, n_layers=5).run_with_cache(tasks.prompt)[1] for f in ("tsm", "dual")]
    for layer in range(5):
        assert torch.allclose(caches[0]["resid_post", layer], caches[1]["resid_post", layer], atol=EXACT)


def test_linear_attention_theta_star_is_linear_td():
    tasks = make_tasks(n=25)
    model = make_star(attention="linear", n_layers=6)
    ref = linear_td(tasks.x, tasks.rewards, 0.9, 6)
    assert (model(tasks.prompt) - ref[:, -1]).abs().max() <= EXACT


def test_large_onehot_scale_approaches_tabular_td():
    tasks = sample_tasks(3, 6, 6, 40, 0.9, feature_kind="onehot", feature_scale=1.0, seed=0)
    ref = tabular_td(tasks.x, tasks.rewards, 0.9, 4)[:, -1]
    gaps = []
    for scale in (1.0, 2.0, 4.0):
        scaled = sample_tasks(3, 6, 6, 40, 0.9, feature_kind="onehot", feature_scale=scale, seed=0)
        gaps.append((make_star(d_features=6, n_layers=4)(scaled.prompt) - ref).abs().max().item())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-5


def test_pattern_masks_query_source_and_normalises():
    tasks = make_tasks()
    for form in ("tsm", "dual"):
        _, cache = make_star(form=form).run_with_cache(tasks.prompt)
        pattern = cache["pattern", 0]
        assert pattern.shape == (4, 2 if form == "dual" else 1, 13, 13)
        assert (pattern[..., -1] == 0).all()
        assert torch.allclose(pattern.sum(-1), torch.ones_like(pattern.sum(-1)), atol=1e-14)


TSM_LAYER = [
    "hook_resid_pre",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "attn.hook_result",
    "hook_attn_out",
    "hook_resid_mid",
    "tsm.hook_shifted",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
]


def test_hook_names_are_pinned():
    expected = ["hook_prompt", "hook_embed"] + [f"blocks.{l}.{name}" for l in range(2) for name in TSM_LAYER]
    assert list(make_star().hook_dict) == expected
    dual = [n for n in TSM_LAYER if n not in ("tsm.hook_shifted", "mlp.hook_post", "hook_mlp_out")]
    assert list(make_star(form="dual").hook_dict) == ["hook_prompt", "hook_embed"] + [
        f"blocks.{l}.{n}" for l in range(2) for n in dual
    ]
    model = make_star()
    for name, hook in model.hook_dict.items():
        if name.startswith("blocks."):
            assert hook.layer() == int(name.split(".")[1])


def test_cache_shapes_match_hook_comments():
    model, tasks = make_star(form="dual"), make_tasks()
    _, cache = model.run_with_cache(tasks.prompt)
    b, p, m = 4, 13, 6
    assert cache["q", 0].shape == cache["k", 0].shape == cache["v", 0].shape == cache["z", 0].shape == (b, p, 2, m)
    assert cache["attn_scores", 1].shape == (b, 2, p, p) and cache["result", 0].shape == (b, p, 2, m)
    assert cache["resid_post", -1].shape == (b, p, m)


def test_stop_at_layer_returns_the_residual():
    model, tasks = make_star(n_layers=3), make_tasks()
    resid = model(tasks.prompt, stop_at_layer=2)
    _, cache = model.run_with_cache(tasks.prompt)
    assert torch.equal(resid, cache["resid_post", 1])
    assert torch.equal(model(tasks.prompt), cache["resid_post", 2][..., model.layout.current])


def test_tsm_shift_rewrites_target_row():
    model, tasks = make_star(), make_tasks()
    _, cache = model.run_with_cache(tasks.prompt)
    post, lay = cache["resid_post", 0], model.layout
    assert torch.equal(post[:, :-1, lay.target], 0.9 * post[:, 1:, lay.current])
    assert (post[:, -1, lay.target] == 0).all()


@pytest.mark.parametrize(
    "prompt, match",
    [
        (torch.zeros(2, 5, 7), "width 7"),
        (torch.zeros(5, 6), "expected a tensor"),
        (torch.zeros(2, 1, 6), "at least one context"),
        (torch.full((2, 5, 6), float("nan")), "NaN"),
    ],
)
def test_bad_prompts_are_named(prompt, match):
    with pytest.raises(ValueError, match=match):
        make_star()(prompt)


def test_hooks_are_temporary_even_when_forward_raises():
    model, tasks = make_star(), make_tasks()

    def boom(act, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_hooks(tasks.prompt, fwd_hooks=[("blocks.0.attn.hook_pattern", boom)])
    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks(fwd_hooks=[("blocks.1.hook_resid_post", boom)]):
            model(tasks.prompt)
    assert all(not h.fwd_hooks and not h.bwd_hooks for h in model.hook_dict.values())
    assert torch.isfinite(model(tasks.prompt)).all()


def test_qk_ov_circuits():
    model = make_star(form="dual", n_layers=2)
    assert model.QK.AB.shape == (2, 2, 6, 6)
    assert torch.equal(model.QK.AB[1, 0], model.blocks[1].attn.A[0].T)
    assert torch.equal(model.OV.AB[0, 1], model.blocks[0].attn.V[1].T)


def test_tied_weights_are_shared():
    model = HookedICTDTransformer(make_cfg(tied=True, n_layers=3))
    assert len(list(model.parameters())) == 2
    assert model.blocks[2].attn.A is model.blocks[0].attn.A


def test_init_is_seeded():
    a, b = HookedICTDTransformer(make_cfg(seed=1)), HookedICTDTransformer(make_cfg(seed=1))
    c = HookedICTDTransformer(make_cfg(seed=2))
    assert torch.equal(a.blocks[1].attn.V, b.blocks[1].attn.V)
    assert not torch.equal(a.blocks[1].attn.V, c.blocks[1].attn.V)


def test_config_round_trip_and_validation():
    cfg = make_cfg(form="dual", tied=True)
    assert ICTDConfig.from_dict(cfg.to_dict()) == cfg
    assert (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.attn_only, cfg.normalization_type) == (6, 2, 6, True, None)
    for bad, match in [
        ({"form": "triple"}, "form"),
        ({"gamma": 1.0}, "gamma"),
        ({"n_layers": 0}, "n_layers"),
        ({"mask": "none"}, "mask"),
        ({"attention": "relu"}, "attention"),
        ({"dtype": "int8"}, "dtype"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_cfg(**bad)
    with pytest.raises(ValueError, match="unknown field"):
        ICTDConfig.from_dict({"d_features": 3, "n_experts": 4})
    assert ICTDConfig.from_dict({"d_features": 3, "d_model": 6, "n_heads": 1}) == ICTDConfig(
        d_features=3, backward="autograd"
    )
    with pytest.raises(ValueError, match="n_heads"):
        ICTDConfig.from_dict({"d_features": 3, "n_heads": 2})


@pytest.mark.parametrize("form", ["tsm", "dual"])
@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("backward", ["fused", "autograd"])
def test_fast_path_equals_the_hooked_forward(form, attention, tied, backward):
    """The paper-mask fast path (all patterns at once, matrix-vector value path), differentiated by the
    hand-written backward or by autograd: same values and gradients as the hooked forward, in float64
    within 1e-12."""
    model = HookedICTDTransformer(
        make_cfg(form=form, attention=attention, tied=tied, n_layers=4, init_scale=0.5, backward=backward)
    )
    prompt = make_tasks().prompt
    params = list(model.parameters())
    for query_only in (False, True):
        fast = model.fast_values(prompt, query_only=query_only)
        slow = model(prompt)[:, -1] if query_only else model(prompt)
        g_fast = torch.autograd.grad(fast.pow(2).sum(), params)
        g_slow = torch.autograd.grad(slow.pow(2).sum(), params)
        assert fast.shape == slow.shape and (fast - slow).abs().max() < 1e-12
        assert max((a - b).abs().max().item() for a, b in zip(g_fast, g_slow)) < 1e-12
        assert max(g.abs().max().item() for g in g_fast) > 1e-3  # the gradients compared are not all zero


@pytest.mark.parametrize("form", ["tsm", "dual"])
@pytest.mark.parametrize("tied", [True, False])
def test_fused_backward_equals_autograd_at_every_depth_and_to_second_order(form, tied):
    """The hand-written backward against autograd on the same weights (float64, 1e-12): first-order
    gradients of TD losses at depths 1-5 (tied) and the NEU objective's second-order gradient (its
    backward is asked for a graph, which the fused path hands to autograd)."""
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.batches import window_batch
    from ictd_interp.training.objectives import neu_loss, td_loss

    config = TrainConfig.from_preset("quick", dtype="float64")
    batch = window_batch(config.tasks, 6, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    models = {
        b: HookedICTDTransformer(
            ICTDConfig(d_features=4, form=form, tied=tied, n_layers=3, dtype="float64", init_scale=0.4, backward=b)
        )
        for b in ("fused", "autograd")
    }
    losses = [neu_loss] + [lambda m, b, d=d: td_loss(m, b, depth=d) for d in ((1, 2, 3, 5) if tied else (None,))]
    for loss in losses:
        fused, auto = (torch.autograd.grad(loss(m, batch), list(m.parameters())) for m in models.values())
        scale = max(g.abs().max().item() for g in auto)
        assert scale > 1e-4 and max((a - b).abs().max().item() for a, b in zip(fused, auto)) < 1e-12 * scale


def test_backward_field_defaults_to_fused_and_old_configs_load_as_autograd():
    assert ICTDConfig(d_features=3).backward == "fused"
    assert ICTDConfig.from_dict({"d_features": 3}).backward == "autograd"  # saved before the field existed
    assert ICTDConfig.from_dict(ICTDConfig(d_features=3).to_dict()).backward == "fused"
    with pytest.raises(ValueError, match="backward"):
        ICTDConfig(d_features=3, backward="manual")


def test_fast_path_runs_every_hook_when_one_is_registered():
    model = HookedICTDTransformer(make_cfg(tied=True, n_layers=3, init_scale=0.5))
    prompt, seen = make_tasks().prompt, []
    assert not model.has_any_hook()
    with model.hooks(fwd_hooks=[(lambda n: n.endswith("hook_pattern"), lambda act, hook: seen.append(hook.name))]):
        assert model.has_any_hook()
        model.fast_values(prompt)
    assert seen == [f"blocks.{l}.attn.hook_pattern" for l in range(3)]
    handle = model.blocks[2].attn.register_forward_hook(lambda *args: seen.append("torch"))
    model.fast_values(prompt)
    handle.remove()
    assert seen[-1] == "torch" and not model.has_any_hook()


def test_a_prompt_where_tasks_are_expected_and_a_gamma_mismatch_are_named():
    from ictd_interp.training.evaluation import msve

    model = make_star()  # gamma 0.9
    other = make_tasks(gamma=0.5)
    with pytest.raises(ValueError, match=r"expected a TaskBatch .* got a tensor of shape \(4, 13, 6\)"):
        model.state_space_values(other.prompt)
    for call in (lambda: model.state_space_values(other), lambda: msve(model, other)):
        with pytest.raises(ValueError, match="sampled with gamma = 0.5, but the model was built for gamma = 0.9"):
            call()
    assert torch.isfinite(model.state_space_values(make_tasks())).all()
