import pytest
import torch

from ictd_interp import HookedICTDTransformer, build_prompt, context_inputs
from ictd_interp.config import registry
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.config.train import PRESETS, TrainConfig
from ictd_interp.training.batches import discounted_returns, window_batch
from ictd_interp.training.objectives import neu_loss, neu_unbiased, objective
from tests.conftest import make_cfg


def test_windows_equal_spec_prompts_of_the_trajectory():
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    batch = window_batch(
        TaskDistribution(n_states=5, d_features=3, context_len=6, gamma=0.9, feature_kind="uniform", feature_scale=1.0),
        3,
        4,
        generator=gen,
    )
    from ictd_interp.tasks.sampling import sample_tasks

    gen.set_state(state)
    tasks = sample_tasks(3, 5, 3, 6 + 3, 0.9, generator=gen)
    prompts = batch.prompts.view(3, 4, 7, 6)
    for t in range(4):
        x, rewards = context_inputs(tasks.features, tasks.mrp.r, tasks.states[:, t : t + 7])
        assert torch.equal(prompts[:, t], build_prompt(x, rewards))
        query = tasks.states[:, t + 6]
        assert torch.equal(batch.query_reward[:, t], tasks.mrp.r.gather(1, query[:, None])[:, 0])
        assert torch.equal(batch.query_value[:, t], tasks.mrp.v_pi.gather(1, query[:, None])[:, 0])


def test_batches_without_values_draw_the_same_windows_and_the_supervised_loss_refuses_them():
    dist = TaskDistribution(
        n_states=5, d_features=3, context_len=6, gamma=0.9, feature_kind="uniform", feature_scale=1.0
    )
    full, lean = (
        window_batch(dist, 3, 4, generator=torch.Generator().manual_seed(0), mc_horizon=2, with_values=v)
        for v in (True, False)
    )
    assert lean.query_value is None and full.query_value is not None
    for name in ("prompts", "query_reward", "query_return"):
        assert torch.equal(getattr(full, name), getattr(lean, name))
    assert lean.select_tasks(slice(0, 2)).to("cpu", torch.float32).query_value is None
    model = HookedICTDTransformer(make_cfg(n_layers=1))
    with pytest.raises(ValueError, match="drawn without true values"):
        objective("supervised")(model, lean)
    assert [name for name, o in registry.OBJECTIVES.items() if o.needs_values] == ["supervised", "supervised-q-star"]


def test_discounted_returns_by_hand():
    r = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    assert discounted_returns(r, 0.5, 2).tolist() == [[2.0, 3.5, 5.0]]


def zero_model_batch():
    model = HookedICTDTransformer(make_cfg(init_scale=0.0, n_layers=1))
    gen = torch.Generator().manual_seed(0)
    return model, window_batch(
        TaskDistribution(n_states=5, d_features=3, context_len=5, gamma=0.9, feature_kind="uniform", feature_scale=1.0),
        4,
        3,
        generator=gen,
        mc_horizon=4,
    )


def test_losses_of_a_zero_model_by_hand():
    model, batch = zero_model_batch()  # predicts 0 everywhere
    assert objective("td")(model, batch).item() == pytest.approx(
        batch.query_reward[:, :-1].pow(2).mean().item(), abs=1e-14
    )
    assert objective("mc")(model, batch).item() == pytest.approx(batch.query_return.pow(2).mean().item(), abs=1e-14)
    assert objective("supervised")(model, batch).item() == pytest.approx(
        batch.query_value.pow(2).mean().item(), abs=1e-14
    )
    # One layer, A = V = 0: uniform attention over the n sources, so v^ = V[cur] . mean source column,
    # whose gradient is that mean column; delta = r. Only V's current row gets gradient.
    means = batch.prompts[:, :-1].mean(1).view(4, 3, -1)[:, :-1]
    u = (batch.query_reward[:, :-1, None] * means).mean((0, 1))
    assert neu_loss(model, batch).item() == pytest.approx(u.pow(2).sum().item(), rel=1e-12)


def test_neu_gradient_matches_finite_differences():
    model = HookedICTDTransformer(make_cfg(init_scale=0.3, n_layers=2, mask="full"))
    gen = torch.Generator().manual_seed(1)
    batch = window_batch(
        TaskDistribution(n_states=4, d_features=3, context_len=4, gamma=0.9, feature_kind="uniform", feature_scale=1.0),
        3,
        3,
        generator=gen,
    )
    neu_loss(model, batch).backward()
    param = model.blocks[1].attn.V
    for idx in [(0, 5, 3), (0, 5, 4), (0, 2, 0), (0, 4, 1)]:
        with torch.no_grad():
            param[idx] += 1e-6
            up = neu_loss(model, batch).item()
            param[idx] -= 2e-6
            down = neu_loss(model, batch).item()
            param[idx] += 1e-6
        assert param.grad[idx].item() == pytest.approx((up - down) / 2e-6, rel=1e-5, abs=1e-10)


def test_theta_star_expected_update_vanishes_as_contexts_grow():
    """Theorem 3 (n first, then depth): theta*'s unbiased NEU falls by orders of magnitude from short
    to longer contexts. (Measured: 28.7 at n=5, ~1e-4..0.08 at n=20, 0.02..0.05 at n=60: past n~20
    the finite depth, not the context, sets what is left, as the theorem's order of limits says.)"""
    model = HookedICTDTransformer.from_theta_star(make_cfg(d_features=4, n_layers=16))
    neu = {}
    for n in (5, 20, 60):
        batch = window_batch(
            TaskDistribution(
                n_states=10, d_features=4, context_len=n, gamma=0.9, feature_kind="uniform", feature_scale=1.0
            ),
            256,
            4,
            generator=torch.Generator().manual_seed(0),
        )
        neu[n] = neu_unbiased(model, batch)
    assert neu[20] < neu[5] / 100 and neu[60] < neu[5] / 100


def test_train_config_validation_and_round_trip():
    cfg = TrainConfig.from_preset("quick", steps=10)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and cfg.model.tied
    assert PRESETS["paper"].model.n_layers == 3 and not PRESETS["paper"].model.tied
    for bad, match in [
        ({"objective": "ppo"}, "objective"),
        ({"gamma": 1.2}, "gamma"),
        ({"feature_kind": "onehot"}, "one-hot"),
        ({"tasks_per_batch": 0}, "tasks_per_batch"),
    ]:
        with pytest.raises(ValueError, match=match):
            TrainConfig.from_flat(**bad)
    with pytest.raises(ValueError, match="preset"):
        TrainConfig.from_preset("huge")


# A run folder's train_config.json as the release before the nesting wrote it: one flat dict of 36 fields.
