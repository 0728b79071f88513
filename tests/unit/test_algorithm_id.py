"""Algorithm identification, depth extrapolation and the iteration map, on cases with known answers."""

import pytest
import torch
from einops import einsum

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.metrics.algorithm_id import (
    identify_layer,
    identify_layers,
    iterated_limit,
    iteration_map,
    moving_map,
    read_layer,
    spectral_verdict,
    state_map,
)
from ictd_interp.analyses.metrics.extrapolation import (
    depth_extrapolation,
    depths_up_to,
    extrapolation_verdict,
    layer_at_depth,
    spectral_depth,
)
from ictd_interp.config.train import TrainConfig
from ictd_interp.models.stylised.theta_star import TDCoefficients
from ictd_interp.tasks.sampling import sample_tasks

TASKS = sample_tasks(32, 8, 4, 20, 0.9, seed=0)
ONEHOT = sample_tasks(32, 8, 8, 40, 0.9, feature_kind="onehot", feature_scale=3.0, seed=0)


def star(**overrides) -> HookedICTDTransformer:
    return HookedICTDTransformer.from_theta_star(
        ICTDConfig(**{"d_features": 4, "n_layers": 3, "dtype": "float64", **overrides})
    )


def hand_built(value_row, beta=1.0, alpha=1.0, tied=True, n_layers=3) -> HookedICTDTransformer:
    """theta*'s kernel scaled by beta, with the current-value row (reward, target, current) given."""
    model = star(tied=tied, n_layers=n_layers)
    lay = model.layout
    with torch.no_grad():
        for attn in model.unique_attention():
            attn.A.mul_(beta)
            attn.V[0, lay.current, [lay.reward, lay.target, lay.current]] = alpha * torch.tensor(
                value_row, dtype=torch.float64
            )
    return model


def test_theta_star_is_identified_exactly():
    rows = identify_layers(star(), TASKS)
    assert rows[0].b is None and rows[0].step == pytest.approx(1, abs=1e-6)  # v_in = 0 at layer 0
    for r in rows[1:]:
        assert (r.step, r.effective_discount, r.current_weight, r.beta) == pytest.approx((1, 0.9, -1, 1), abs=1e-6)
        assert r.fve > 1 - 1e-9 and r.in_family


def test_scaled_theta_star_is_recovered():
    """alpha = 0.5, beta = 2: a = 0.5, b = 0.45, c = -0.5."""
    for r in identify_layers(hand_built((1.0, 1.0, -1.0), beta=2.0, alpha=0.5), TASKS)[1:]:
        assert (r.step, r.b, r.c, r.beta) == pytest.approx((0.5, 0.45, -0.5, 2.0), abs=1e-6)


def test_identical_layers_give_identical_parameters():
    rows = identify_layers(hand_built((0.8, 1.3, -0.7), beta=1.5), TASKS)[1:]
    keys = ("step", "beta", "b", "c", "effective_discount")
    for key in keys:
        assert getattr(rows[0], key) == pytest.approx(getattr(rows[1], key), abs=1e-6)
    assert rows[0].effective_discount == pytest.approx(0.9 * 1.3 / 0.7, abs=1e-6)


def test_a_layer_outside_the_family_is_flagged():
    model = star()
    with torch.no_grad():  # a feature-dependent write: no TD update of this family produces it
        model.blocks[1].attn.V[0, model.layout.current, :4] = torch.tensor([3.0, -3.0, 2.0, -2.0], dtype=torch.float64)
    row = identify_layers(model, TASKS)[1]
    assert row.fve < 0.95 and not row.in_family


def test_spectral_radius_of_theta_star_on_sharp_onehot_features():
    model = star(d_features=8)
    result = iteration_map(model, ONEHOT, layer=1, coefficients=TDCoefficients(1.0, 0.9, -1.0))
    assert result.spectral_radius_max < 1 and result.fraction_contracting == 1.0
    # one-hot features at scale 3: M^ is close to I and P^ to the empirical transitions, so T ~ gamma P^
    assert result.spectral_radius_mean == pytest.approx(0.9, abs=0.05)
    assert result.fixed_point_error is not None


def test_the_pattern_map_skips_the_neutral_eigenvalue_as_the_weights_map_does():
    """θ*'s own pattern through ``state_map`` (the path of dual, linear and full-mask layers): a query state that
    is never a source adds T's eigenvalue exactly 1, which the map never moves. Read on the part that moves, the
    radius and the fixed point are the state-space reading's (rho(H), the depth limit) to rounding."""
    model = star(d_features=8)
    tasks = sample_tasks(64, 8, 8, 8, 0.9, feature_kind="onehot", feature_scale=2.0, seed=3)
    never_source = sum(int(s[-1]) not in s[:-1].tolist() for s in tasks.states)
    assert never_source >= 10  # the case under test is common at n = 8
    _, cache = model.run_with_cache(tasks.prompt, names_filter="blocks.0.attn.hook_pattern")
    by_pattern = state_map(cache["pattern", 0][:, 0], tasks, 1.0, 0.9, -1.0)
    by_weights = iteration_map(model, tasks, 0, TDCoefficients(1.0, 0.9, -1.0))
    assert by_pattern.neutral_tasks == by_weights.neutral_tasks == never_source
    assert by_pattern.spectral_radius == pytest.approx(by_weights.spectral_radius, abs=1e-10)
    assert by_pattern.fixed_point_errors == pytest.approx(by_weights.fixed_point_errors, abs=1e-9)
    assert by_pattern.verdict == by_weights.verdict == "converges when iterated"


def test_the_moving_part_of_a_map_by_hand():
    """T = [[0.5, 0.3], [0, 1]]: T - I has range e_0, where T acts as 0.5; iterating v <- T v + e_0 from 0
    converges to 2 e_0, while the eigenvalue 1 (direction e_1 modulo e_0) is never excited."""
    T = torch.tensor([[0.5, 0.3], [0.0, 1.0]], dtype=torch.float64)
    basis, moving = moving_map(T)
    assert basis.shape == (2, 1) and abs(abs(float(basis[0, 0])) - 1) < 1e-15
    assert moving.item() == pytest.approx(0.5, abs=1e-15)
    v = torch.zeros(2, dtype=torch.float64)
    for _ in range(60):
        v = T @ v + torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert v.tolist() == pytest.approx([2.0, 0.0], abs=1e-12)
    assert moving_map(torch.eye(3, dtype=torch.float64))[0].shape == (3, 0)  # the identity never moves
    radius, limit, neutral = iterated_limit(T, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert radius == pytest.approx(0.5, abs=1e-15) and limit.tolist() == pytest.approx([2.0, 0.0], abs=1e-12)
    assert neutral
    # a step along e_1 (off the moving part) is added whole at every layer: v_1 grows as L, no limit
    radius, limit, _ = iterated_limit(T, torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert radius == 1.0 and limit is None and spectral_verdict([radius]).verdict != "converges when iterated"
    radius, limit, neutral = iterated_limit(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    assert (radius, limit, neutral) == (1.0, None, True)  # T = I moves nothing: neutral, not a contraction


def test_the_learned_value_row_of_the_quick_model_diverges_when_iterated():
    """The value row (1.70, 2.01, -1.36): effective discount 0.9 * 2.01 / 1.36 = 1.33 > 1."""
    bad = hand_built((1.70, 2.01, -1.36))
    rows = identify_layers(bad, TASKS)
    assert rows[1].effective_discount == pytest.approx(1.33, abs=0.01)
    extrapolation = depth_extrapolation(bad, star(), TASKS, factor=4)
    assert read_layer(bad, 1).effective_discount == pytest.approx(0.9 * 2.01 / 1.36, abs=1e-6)
    assert not extrapolation.converges and extrapolation.verdict.startswith("diverges after depth")
    deep = extrapolation.model[extrapolation.depths.index(extrapolation.best_depth) :]
    assert all(a < b for a, b in zip(deep, deep[1:]))  # grows with depth past its best
    radii = iteration_map(bad, TASKS, 1, read_layer(bad, 1).coefficients)
    assert radii.fraction_contracting == 0 and radii.verdict == "diverges when iterated"


def test_theta_star_extrapolates_and_converges():
    result = depth_extrapolation(star(), star(), TASKS, factor=8)
    assert result.depths[-1] == 24 and result.converges
    assert all(a > b for a, b in zip(result.model, result.model[1:]))  # decreasing
    assert result.model == result.reference


def test_verdict_rule_by_hand():
    assert extrapolation_verdict([1, 2, 4], [3.0, 2.0, 1.0])[2] == "converges"
    assert extrapolation_verdict([1, 2, 4], [3.0, 1.0, 2.0])[2] == "diverges after depth 2"
    assert extrapolation_verdict([1, 2, 4], [3.0, 1.0, float("nan")])[2] == "diverges after depth 2"
    plateau = extrapolation_verdict([1, 2, 4, 8], [3.0, 1.0, 3.4, 3.42])  # the paper model's shape
    assert plateau[2] == "settles on a worse fixed point after depth 2"
    assert not plateau[1]  # its error rises with depth: never said to converge


def test_per_layer_models_repeat_their_last_layer():
    model = hand_built((1.0, 1.0, -1.0), tied=False)
    with torch.no_grad():
        model.blocks[2].attn.V.mul_(0.5)
    deeper = layer_at_depth(model, 5)
    assert torch.equal(deeper.blocks[4].attn.V, model.blocks[2].attn.V)
    assert torch.equal(deeper.blocks[1].attn.V, model.blocks[1].attn.V)


def test_weights_are_read_exactly_for_scaled_theta_star():
    """alpha = 0.5, beta = 2 in every layer: a = 0.5, b = 0.45, c = -0.5, beta 2, isotropy 1; layer 0 of a
    per-layer model sees zero values, so its b and c are None."""
    for row in (read_layer(hand_built((1.0, 1.0, -1.0), beta=2.0, alpha=0.5), layer) for layer in range(3)):
        assert (row.step, row.b, row.c, row.beta, row.kernel_isotropy) == pytest.approx(
            (0.5, 0.45, -0.5, 2.0, 1.0), abs=1e-12
        )
    untied = hand_built((1.0, 1.0, -1.0), tied=False)
    assert read_layer(untied, 0).b is None and read_layer(untied, 1).effective_discount == pytest.approx(0.9)


def test_a_negative_inverse_temperature_is_read_and_fitted():
    """A = -I (depth3-neu-s0 has A ~ -0.21 I): the weights say beta = -1; the function-space fit, which
    searches both signs, finds it too (measured condition number 12.5)."""
    model = hand_built((1.0, 1.0, -1.0), beta=-1.0)
    assert read_layer(model, 1).beta == pytest.approx(-1.0, abs=1e-12)
    fitted = identify_layers(model, TASKS)[1]
    assert fitted.beta == pytest.approx(-1.0, abs=1e-6) and fitted.identifiable
    assert fitted.interval.effective_discount[0] <= 0.9 <= fitted.interval.effective_discount[1]


def test_an_ill_posed_regression_is_reported_not_identifiable():
    """If v_in is exactly proportional to the kernel-weighted reward, the columns are collinear."""
    from ictd_interp.reference.td import feature_scores

    scores, rewards = feature_scores(TASKS.x.double()), TASKS.rewards.double()
    v_in = torch.ones_like(TASKS.v_true)  # b and c columns: the same kernel sums of ones
    row = identify_layer(scores, rewards, v_in, torch.randn_like(v_in))
    assert row.condition_number > 1e6 and not row.identifiable


@pytest.mark.parametrize("name", ["depth3-td-s0", "depth3-neu-s0", "depth3-mc-s0"])
def test_shipped_tied_models_give_one_answer_for_their_identical_layers(name):
    """Read from the weights, the three tied layers agree to 1e-6 (they are one layer); the numbers are
    the ones an independent read of V and A gives (issue 23: NEU -0.93 with A ~ -0.21 I, MC -1.10)."""
    model = HookedICTDTransformer.from_pretrained(name)
    rows = [read_layer(model, layer) for layer in range(3)]
    for key in ("step", "b", "c", "effective_discount", "beta"):
        assert max(getattr(r, key) for r in rows) - min(getattr(r, key) for r in rows) < 1e-6
    lay, V = model.layout, model.blocks[0].attn.V[0].detach().double()
    independent = 0.9 * float(V[lay.current, lay.target]) / -float(V[lay.current, lay.current])
    assert rows[0].effective_discount == pytest.approx(independent, abs=1e-9)
    expected = {"depth3-td-s0": (1.33, 1.67), "depth3-neu-s0": (-0.93, -0.21), "depth3-mc-s0": (-1.10, 0.35)}[name]
    assert (rows[0].effective_discount, rows[0].beta) == pytest.approx(expected, abs=0.01)


def test_spectral_verdict_and_depth_rules_by_hand():
    assert spectral_verdict([0.5, 0.9]).verdict == "converges when iterated"
    assert spectral_verdict([1.1, 1.02]).verdict == "diverges when iterated"
    mixed = spectral_verdict([0.9, 1.1, 0.8, 0.95])
    assert mixed.verdict == "converges when iterated on 75% of tasks only" and not mixed.converges
    # rho 1.08 (depth3-neu-s0): ln(1000) / ln(1.08) = 89.8 -> 90 layers, beyond the fixed 24 of before
    assert spectral_depth([1.08], trained=3) == 90 and spectral_depth([0.5], trained=3) == 24
    assert depths_up_to(90, 3) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 90]


def test_the_quick_neu_model_diverges_by_its_spectrum():
    """Its layer's map has rho > 1 on every task (mean ~1.08, min ~1.025), so it cannot converge,
    whatever a 24-layer error curve shows."""
    from ictd_interp.io import pretrained as registry
    from ictd_interp.training.evaluation import EvalSet

    model = HookedICTDTransformer.from_pretrained("depth3-neu-s0")
    tasks = EvalSet.build(TrainConfig.from_dict(registry.card("depth3-neu-s0")["train_config"])).tasks[:64]
    result = iteration_map(model, tasks, 2, read_layer(model, 2).coefficients)
    assert result.spectral_radius_min > 1.0 and result.verdict == "diverges when iterated"
    assert result.spectral_radius_mean == pytest.approx(1.08, abs=0.02)


def test_tabular_identification_recovers_tabular_td_exactly():
    """Values produced by tabular TD (same-state kernel) are identified by the tabular family with
    fve 1 and the true (a, b, c); the softmax family fits them worse."""
    from ictd_interp.analyses.metrics.algorithm_id import identify_from_values
    from ictd_interp.reference.td import same_state_kernel
    from tests.conftest import make_tasks

    tasks = make_tasks(n_tasks=16, n=20)
    K, rewards, gamma = same_state_kernel(tasks.states), tasks.rewards.double(), 0.9
    values = [torch.zeros_like(tasks.v_true)]
    for _ in range(3):
        v = values[-1]
        delta = rewards + gamma * v[:, 1:] - v[:, :-1]
        values.append(v + 0.5 * einsum(delta, K, "b k, b k j -> b j"))
    rows = identify_from_values(torch.stack(values), tasks, kernel="tabular")
    assert rows[0].fve == pytest.approx(1.0, abs=1e-10) and rows[0].step == pytest.approx(0.5, abs=1e-10)
    assert all(row.fve == pytest.approx(1.0, abs=1e-10) for row in rows)
    # after one step v = 0.5 r(s): the reward and current-value columns are collinear, so (a, c) are
    # identified from the next layer on, where they are exact
    for row in rows[2:]:
        assert (row.step, row.b, row.c) == pytest.approx((0.5, 0.45, -0.5), abs=1e-8)
        assert row.effective_discount == pytest.approx(0.9, abs=1e-8)
    softmax = identify_from_values(torch.stack(values), tasks)
    assert softmax[2].fve < rows[2].fve
