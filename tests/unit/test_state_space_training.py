"""Training through the exact state-space forward: the same losses and gradients as the positional fast path, and the
training options that go with it (depths averaged in the loss, the learning-rate schedule, clipping), each refused
where it does not apply."""

import math
from dataclasses import replace

import pytest
import torch

from ictd_interp import TrainConfig
from ictd_interp.models.registry import build_model
from ictd_interp.models.stylised.state_space import layer_parts, moving_radius, window_value_map_radius
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.stacked import stack_refusal
from ictd_interp.training.trainer import step_loss


def _loss_and_grads(config: TrainConfig) -> tuple[float, list[torch.Tensor]]:
    model = build_model(replace(config.model, init_scale=0.3))
    stream = BatchStream(config, torch.Generator().manual_seed(3), torch.float64)
    batch, depth = next(stream)
    loss = step_loss(stream.objective, model, batch, depth, config)
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("objective", ["td", "neu", "mc", "supervised"])
def test_state_space_batches_give_the_positional_loss_and_gradient_in_float64(objective):
    """Every objective, with the loss averaged over two depths (NEU's second-order gradient too): 1e-12 relative."""
    settings = dict(dtype="float64", objective=objective, tasks_per_batch=6, loss_depths="12,30")
    positional = _loss_and_grads(TrainConfig.from_preset("quick", **settings))
    state_space = _loss_and_grads(TrainConfig.from_preset("quick", forward="state-space", **settings))
    assert state_space[0] == pytest.approx(positional[0], rel=1e-12)
    for a, b in zip(positional[1], state_space[1]):
        assert float((a - b).abs().max()) <= 1e-12 * float(a.abs().max())


def test_a_state_space_batch_holds_counts_not_prompts():
    config = TrainConfig.from_preset("quick", forward="state-space", tasks_per_batch=4)
    batch, _ = next(BatchStream(config, torch.Generator().manual_seed(0), torch.float32))
    assert batch.prompts is None
    counts = batch.space.counts  # [task, window, state, next state]: n transitions in every window
    assert counts.shape == (4, 17, 10, 10) and torch.all(counts.sum((-1, -2)) == 30)
    assert batch.select_tasks(slice(1, 3)).space.counts.shape[0] == 2
    assert stack_refusal([config, replace(config, seed=1)]).startswith("a stack runs the positional")


@pytest.mark.parametrize(
    "settings, named",
    [
        (dict(forward="state-space", form="dual"), "forward"),
        (dict(forward="state-space", mask="full"), "forward"),
        (dict(forward="state-space", attention="linear"), "forward"),
        (dict(forward="state-space", shuffle_rewards=True), "forward"),
        (dict(forward="state-space", family="mdp-random", n_states=4), "forward"),
        (dict(forward="sideways"), "forward"),
        (dict(loss_depths="12,x"), "loss_depths"),
        (dict(loss_depths="12,12"), "loss_depths"),
        (dict(loss_depths="0,12"), "loss_depths"),
        (dict(loss_depths="12,24", train_depths="6:18"), "loss_depths"),
        (dict(loss_depths="12,24", tied=False), "loss_depths"),
        (dict(lr_schedule="linear"), "lr_schedule"),
        (dict(warmup_steps=-1), "warmup_steps"),
        (dict(grad_clip=-1.0), "grad_clip"),
        (dict(grad_clip=math.inf), "grad_clip"),
        (dict(forward="state-space", spectral_penalty=-1.0), "spectral_penalty"),
        (dict(forward="state-space", spectral_penalty=math.nan), "spectral_penalty"),
        (dict(forward="state-space", spectral_penalty=math.inf), "spectral_penalty"),
        (dict(spectral_penalty=1.0), "spectral_penalty"),
        (dict(forward="state-space", spectral_penalty=1.0, tied=False), "spectral_penalty"),
    ],
)
def test_bad_training_options_are_refused_by_name(settings, named):
    with pytest.raises(ValueError, match=f"^{named}"):
        TrainConfig.from_preset("quick", **settings)


def test_the_learning_rate_schedule_by_hand():
    config = TrainConfig.from_preset("quick", lr=1.0, steps=10, warmup_steps=4, lr_schedule="cosine")
    assert config.lr_at(0) == pytest.approx(0.25 * 0.5 * (1 + math.cos(0)))
    assert config.lr_at(3) == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 10)))
    assert config.lr_at(9) == pytest.approx(0.5 * (1 + math.cos(math.pi * 9 / 10)))
    assert TrainConfig.from_preset("quick").lr_at(700) == 1e-2  # constant, no warm-up: the preset's own number


@pytest.mark.parametrize("tied", [True, False])
def test_a_state_space_run_is_evaluated_as_the_positional_forward_reads_it(tied):
    """The training-time metrics of a state-space run (``EvalSet.state_space``) equal the positional forward's:
    the error and each layer's kernel diagonality (per-layer weights: each layer its own kernel), float64."""
    from ictd_interp.models.stylised.model import HookedICTDTransformer
    from ictd_interp.training.evaluation import EvalSet, evaluate, msve

    config = TrainConfig.from_preset(
        "deep", n_layers=3, tied=tied, dtype="float64", n_eval_tasks=12, init_scale=0.5, seed=4
    )
    model = build_model(config.model)
    by_counts = EvalSet.build(config)
    positional = replace(by_counts, state_space=False)
    star = msve(HookedICTDTransformer.from_theta_star(config.model), by_counts.tasks)  # the positional forward's
    assert by_counts.state_space and by_counts.theta_star_msve == pytest.approx(star, rel=1e-12)
    a, b = evaluate(model, by_counts), evaluate(model, positional)
    assert a.eval_msve == pytest.approx(b.eval_msve, rel=1e-12)
    diag_a, diag_b = (torch.tensor(m.kernel_diagonality_heads, dtype=torch.float64) for m in (a, b))
    assert diag_a.shape == diag_b.shape == (3, 1) and float((diag_a - diag_b).abs().max()) <= 1e-12
    layers = [row[0] for row in a.kernel_diagonality_heads]
    assert (len(set(layers)) == 1) == tied  # a tied model's layers share one kernel; random per-layer ones do not


def value_map_radius(A, w, X, r, N, gamma: float) -> torch.Tensor:
    kernel, _, F = layer_parts(A, w, X, r, N, gamma)
    return moving_radius(kernel, F, N.sum(-1) > 0)


def _context(w_cur: float, w_tar: float, transitions: list[tuple[int, int]]) -> tuple:
    """Three one-hot states and a context of ``transitions``; inverse temperature 30, so a source state attends to
    itself alone (to e^-30) and state 2, whose feature no other state shares, to every source alike."""
    A = 30.0 * torch.eye(3, dtype=torch.float64).unsqueeze(0)
    w = torch.tensor([[0.0, 0.0, 0.0, 0.0, w_tar, w_cur]], dtype=torch.float64)  # x (3), reward, target, current
    N = torch.zeros(1, 3, 3, dtype=torch.float64)
    for a, b in transitions:
        N[0, a, b] += 1.0
    return A, w, torch.eye(3, dtype=torch.float64).unsqueeze(0), torch.zeros(1, 3, dtype=torch.float64), N


ALTERNATING = [(0, 1), (1, 0), (0, 1), (1, 0)]  # state 2 never visited


@pytest.mark.parametrize(
    "w_cur, w_tar, transitions, radius",
    [
        (-1.0, 1.0, ALTERNATING, 0.5),
        (-0.5, 0.5, ALTERNATING, 0.75),
        (-2.0, 1.0, ALTERNATING, 1.5),
        (-1.0, 1.0, [(0, 1), (1, 0), (0, 1), (1, 2)], 0.5),
    ],
)
def test_the_value_map_radius_by_hand(w_cur, w_tar, transitions, radius):
    """gamma = 0.5. Alternating 0 <-> 1: the moving part is ``(1 + w_cur) I + gamma w_tar P`` (``P`` the swap),
    radius ``|1 + w_cur +- 0.5 w_tar|``, the larger. Ending in state 2, a next state that is never a source: with
    ``c = (2, 2)`` and state 2 attending to both sources by 1/4, ``H = [[0, 1/2], [3/8, 1/8]]``, eigenvalues 1/2 and
    -3/8. A state that is not a source (unvisited, or visited only as the last next state) never moves the values:
    its eigenvalue 1 is not counted (each case would read 1)."""
    got = value_map_radius(*_context(w_cur, w_tar, transitions), gamma=0.5)
    assert float(got) == pytest.approx(radius, abs=1e-12)


def test_the_batched_radius_is_each_tasks_source_block():
    """``moving_radius`` (the source block, batched by zeroing the rest) against each task's own block, as the depth
    limit computed it alone: the same to 1e-12 on Boyan contexts, a trained-like layer."""
    from ictd_interp.models.stylised.state_space import transition_counts
    from ictd_interp.tasks.sampling import sample_from

    tasks = sample_from(TrainConfig.from_preset("deep").tasks, 16, seed=4)
    g = torch.Generator().manual_seed(1)
    A = torch.eye(4, dtype=torch.float64) * 2 + 0.3 * torch.randn(4, 4, generator=g, dtype=torch.float64)
    w = torch.tensor([0.1, -0.2, 0.05, 0.3, 0.4, 0.45, -0.5], dtype=torch.float64)
    N = transition_counts(tasks.states, tasks.mrp.n_states)
    kernel, _, F = layer_parts(A[None], w[None], tasks.features.double(), tasks.mrp.r.double(), N, 0.9)
    source = N.sum(-1) > 0
    batched = moving_radius(kernel, F, source)
    for t in range(16):
        s = source[t]
        H = torch.eye(int(s.sum()), dtype=torch.float64) + F[t][s] @ kernel[t][:, s]
        assert float(batched[t]) == pytest.approx(float(torch.linalg.eigvals(H).abs().max()), abs=1e-12)


def test_the_value_map_radius_has_the_finite_difference_gradient():
    A, w, X, r, N = _context(-0.7, 0.9, ALTERNATING)
    A = A / 10 + 0.1 * torch.randn(1, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = (w + 0.1).requires_grad_()
    assert torch.autograd.gradcheck(lambda w: value_map_radius(A, w, X, r, N, 0.5), (w,))


def test_the_spectral_penalty_adds_its_weight_times_the_mean_radius_to_the_loss():
    config = TrainConfig.from_preset("deep", dtype="float64", tasks_per_batch=6, spectral_penalty=2.5)
    model = build_model(replace(config.model, init_scale=0.3))
    batch, depth = next(BatchStream(config, torch.Generator().manual_seed(3), torch.float64))
    penalised = step_loss(BatchStream(config, torch.Generator(), torch.float64).objective, model, batch, depth, config)
    plain = step_loss(
        BatchStream(config, torch.Generator(), torch.float64).objective,
        model,
        batch,
        depth,
        replace(config, spectral_penalty=0.0),
    )
    radius = window_value_map_radius(model, batch.space)
    assert radius.shape == (6,) and bool((radius > 0.5).all())
    # its gradient reaches the layer: the penalised loss's gradient is the plain one's plus 2.5 x the radius's
    grads = [torch.autograd.grad(x, list(model.parameters()), allow_unused=True) for x in (penalised, plain)]
    extra = torch.autograd.grad(radius.mean(), list(model.parameters()), allow_unused=True)
    moved = [e for e in extra if e is not None and bool(e.abs().max() > 0)]
    assert moved, "the radius has no gradient in the model's weights"
    for p_grad, q_grad, e in zip(*grads, extra):
        if e is not None:
            assert torch.allclose(p_grad - q_grad, 2.5 * e, rtol=1e-9, atol=1e-12 * float(p_grad.abs().max()))
    assert float(penalised) == pytest.approx(float(plain) + 2.5 * float(radius.mean()), rel=1e-14)
    assert float(penalised) != pytest.approx(float(plain), rel=1e-14)
