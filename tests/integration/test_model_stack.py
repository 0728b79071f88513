"""Many models in one process: the fast path's model axis, ``ModelStack`` and ``train_stack`` against each model's
own forward and run (float64), resume, refusals, and which study cells are stacked."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.io.checkpoint import CheckpointError
from ictd_interp.training.stacked import resume_stack, train_stack
from ictd_interp.training.trainer import resume, train
from tests.support.model_stack import SMALL, rel


def configs(seeds=(0, 1, 2), preset="quick", **settings):
    return [TrainConfig.from_preset(preset, seed=s, **{**SMALL, **settings}) for s in seeds]


def final_state(run) -> dict:
    return {k: v.clone() for k, v in run.model.state_dict().items()}


@pytest.mark.parametrize(
    "objective,preset",
    [
        ("td", "quick"),
        ("neu", "quick"),
        ("mc", "paper"),
        ("supervised", "quick"),
        ("q-learning", "control-quick"),
        ("supervised-q-star", "control-quick"),
    ],
)
def test_each_run_of_a_stack_reaches_its_own_runs_weights(tmp_path, objective, preset):
    cfgs = configs(seeds=(0, 1), preset=preset, objective=objective, steps=16)
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(2)], progress=False)
    for i, (config, run) in enumerate(zip(cfgs, stacked)):
        alone = train(config, tmp_path / f"a{i}", progress=False)
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, name
        assert [m["step"] for m in run.metrics] == [m["step"] for m in alone.metrics]
        assert run.metrics[-1]["loss"] == pytest.approx(alone.metrics[-1]["loss"], rel=1e-11)
        assert run.metrics[-1]["models_in_process"] == 2 and "models_in_process" not in alone.metrics[-1]


CONDITIONS = [  # one stack, four conditions: rate, schedule and warm-up, step count, clipping, task pool
    {"lr": 1e-3},
    {"lr": 3e-2, "lr_schedule": "cosine", "warmup_steps": 5},
    {"lr": 1e-2, "steps": 13, "task_pool": 4},
    {"lr": 2e-2, "grad_clip": 0.05, "shuffle_rewards": True},
]


def test_runs_in_different_conditions_share_a_stack_each_reaching_its_own_runs_weights(tmp_path, monkeypatch):
    cfgs = [TrainConfig.from_preset("quick", seed=s, **{**SMALL, **c}) for s, c in enumerate(CONDITIONS)]
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(4)], progress=False)
    for i, (config, run) in enumerate(zip(cfgs, stacked)):
        alone = train(config, tmp_path / f"a{i}", progress=False)
        assert run.step == alone.step == config.steps and not run.interrupted
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, (i, name)
        assert [m["step"] for m in run.metrics] == [m["step"] for m in alone.metrics]  # 0, 8, 13 for the short one
        assert run.metrics[-1]["loss"] == pytest.approx(alone.metrics[-1]["loss"], rel=1e-11)
    # the check can fail: without clipping the clipped run misses its own run, and with one rate for every model
    # (the first run's schedule) so does the run with another schedule
    import ictd_interp.training.stacked as stacked_module

    for i, (name, broken) in zip((3, 1), [("_clip_per_model", lambda stack, clips: None), ("_schedule", lambda c: 0)]):
        monkeypatch.setattr(stacked_module, name, broken)
        wrong = train_stack(cfgs, [tmp_path / f"{name}{k}" for k in range(4)], progress=False)
        alone = train(cfgs[i], tmp_path / f"again{i}", progress=False)
        assert max(rel(wrong[i].model.state_dict()[k], w) for k, w in final_state(alone).items()) > 1e-3, name


def test_a_stopped_stack_resumes_to_the_uninterrupted_stacks_weights_and_each_run_resumes_alone(tmp_path):
    cfgs = configs()
    whole = train_stack(cfgs, [tmp_path / f"w{i}" for i in range(3)], progress=False)
    polls = iter(range(10**6))
    stopped = train_stack(
        cfgs, [tmp_path / f"p{i}" for i in range(3)], progress=False, stop=lambda: next(polls) >= 10
    )  # stops after step 10: checkpoint at step 10
    assert all(r.interrupted and r.step == 10 for r in stopped)
    assert (tmp_path / "p1" / "checkpoints" / "step_0000010").exists()
    for i in range(3):  # a run of a stack continues alone, as any run (its own optimiser state was saved)
        alone = resume(tmp_path / f"p{i}", progress=False)
        for name, weight in final_state(whole[i]).items():
            assert rel(alone.model.state_dict()[name], weight) < 1e-11
    polls = iter(range(10**6))
    train_stack(cfgs, [tmp_path / f"q{i}" for i in range(3)], progress=False, stop=lambda: next(polls) >= 10)
    resumed = resume_stack([tmp_path / f"q{i}" for i in range(3)], progress=False)
    for run, done in zip(resumed, whole):  # together: bit for bit
        assert all(torch.equal(run.model.state_dict()[k], v) for k, v in final_state(done).items())
        metrics = [json.loads(line) for line in (run.out_dir / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics] == [0, 8, 16, 24]
        assert [m["loss"] for m in metrics] == [m["loss"] for m in done.metrics]


def test_a_stacked_runs_checkpoint_holds_the_optimiser_state_of_its_own_run(tmp_path):
    cfgs = configs(seeds=(3, 4), steps=8)
    train_stack(cfgs, [tmp_path / "s0", tmp_path / "s1"], progress=False)
    train(cfgs[1], tmp_path / "alone", progress=False)
    states = [
        torch.load(d / "checkpoints" / "step_0000008" / "training_state.pt", weights_only=True)
        for d in (tmp_path / "s1", tmp_path / "alone")
    ]
    assert states[0]["step"] == states[1]["step"] == 8
    assert torch.equal(states[0]["generator"], states[1]["generator"])  # the run's own data, in its order
    stacked, alone = (s["optimizer"]["state"] for s in states)
    assert stacked.keys() == alone.keys() and len(alone) == 2  # the tied model's A and V
    for k in alone:
        assert float(stacked[k]["step"]) == float(alone[k]["step"]) == 8
        assert rel(stacked[k]["exp_avg"], alone[k]["exp_avg"]) < 1e-11
        assert rel(stacked[k]["exp_avg_sq"], alone[k]["exp_avg_sq"]) < 1e-11


def test_train_stack_refuses_runs_it_cannot_stack_naming_why(tmp_path):
    with pytest.raises(ValueError, match=r"configs\[1\]: differs from configs\[0\] beyond seed, lr.*\(objective"):
        train_stack([configs()[0], configs(objective="mc")[1]], [tmp_path / "a", tmp_path / "b"], progress=False)
    with pytest.raises(ValueError, match="depth-sampled runs"):
        train_stack(configs(train_depths="1:3")[:2], [tmp_path / "a", tmp_path / "b"], progress=False)
    with pytest.raises(ValueError, match="stylised model's paper-mask fast path"):
        train_stack(configs(preset="standard-quick")[:2], [tmp_path / "a", tmp_path / "b"], progress=False)
    with pytest.raises(ValueError, match="would share a folder"):
        train_stack(configs()[:2], [tmp_path / "a", tmp_path / "a"], progress=False)
    assert not (tmp_path / "a").exists()  # refused before any folder is written
    polls = iter(range(10**6))
    train(configs()[0], tmp_path / "r0", progress=False, stop=lambda: next(polls) >= 12)  # checkpoints at 8, 12
    polls = iter(range(10**6))
    train(configs()[1], tmp_path / "r1", progress=False, stop=lambda: next(polls) >= 5)  # one at 5
    with pytest.raises(CheckpointError, match=r"no step at which every run has a usable checkpoint.*r0.*r1"):
        resume_stack([tmp_path / "r0", tmp_path / "r1"], progress=False)


def test_a_stack_killed_between_its_runs_checkpoint_writes_resumes_from_the_step_they_share(tmp_path):
    cfgs = configs()
    whole = train_stack(cfgs, [tmp_path / f"w{i}" for i in range(3)], progress=False)
    polls = iter(range(10**6))
    dirs = [tmp_path / f"p{i}" for i in range(3)]
    train_stack(cfgs, dirs, progress=False, stop=lambda: next(polls) >= 10)  # checkpoints at 8 and 10
    for d in dirs[1:]:  # as if killed after run 0 wrote step 10: runs 1 and 2 stand at step 8
        shutil.rmtree(d / "checkpoints" / "step_0000010")
    resumed = resume_stack(dirs, progress=False)
    for run, done in zip(resumed, whole):  # from step 8, all three: bit for bit the uninterrupted stack
        assert all(torch.equal(run.model.state_dict()[k], v) for k, v in final_state(done).items())
        metrics = [json.loads(line) for line in (run.out_dir / "metrics.jsonl").read_text().splitlines()]
        assert [m["loss"] for m in metrics] == [m["loss"] for m in done.metrics]
    assert not (dirs[0] / "checkpoints" / "step_0000010").exists()  # no later resume can start from it ...
    assert (dirs[0] / "checkpoints" / "superseded_step_0000010" / "model.safetensors").exists()  # ... kept


def test_a_stack_that_cannot_agree_on_a_step_changes_no_runs_metrics_or_checkpoints(tmp_path):
    dirs = [tmp_path / f"p{i}" for i in range(3)]
    polls = iter(range(10**6))
    train_stack(configs(), dirs, progress=False, stop=lambda: next(polls) >= 10)  # checkpoints at 8 and 10
    for d in dirs[1:]:
        shutil.rmtree(d / "checkpoints" / "step_0000010")
    (dirs[1] / "checkpoints" / "step_0000008" / "model.safetensors").write_bytes(b"cut")  # run 1's only one
    metrics = (dirs[0] / "metrics.jsonl").read_text()
    with pytest.warns(UserWarning, match="unusable checkpoint"), pytest.raises(CheckpointError, match="p1"):
        resume_stack(dirs, progress=False)
    assert (dirs[0] / "metrics.jsonl").read_text() == metrics  # run 0 ahead: nothing of it dropped
    assert (dirs[0] / "checkpoints" / "step_0000010").exists()
    assert resume(dirs[0], progress=False).metrics[-1]["step"] == 24  # it continues alone from step 10


@pytest.mark.parametrize("optimizer,weight_decay", [("sgd", 0.0), ("sgd", 1e-2), ("adamw", 1e-2)])
def test_every_optimiser_updates_each_model_of_a_stack_as_its_own_run(tmp_path, optimizer, weight_decay):
    cfgs = configs(seeds=(0, 1), steps=16, optimizer=optimizer, weight_decay=weight_decay, lr=1e-2)
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(2)], progress=False)
    for i, (config, run) in enumerate(zip(cfgs, stacked)):
        alone = train(config, tmp_path / f"a{i}", progress=False)
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, name


@pytest.mark.parametrize("steps,stop_at", [((6, 20), 12), ((12, 30), 23)])
def test_a_stack_whose_runs_stop_at_different_steps_resumes_bit_for_bit(tmp_path, steps, stop_at):
    """A run that is done stays at its own end when the stack resumes: it is not rewound with the others (its
    checkpoints and metrics untouched), and the runs still training resume from the step they share, reaching
    the uninterrupted stack's weights bit for bit (the Adam step count taken from a run still training)."""
    cfgs = [TrainConfig.from_preset("quick", seed=s, **{**SMALL, "steps": n}) for s, n in enumerate(steps)]
    whole = train_stack(cfgs, [tmp_path / f"w{i}" for i in range(2)], progress=False)
    polls = iter(range(10**6))
    dirs = [tmp_path / f"p{i}" for i in range(2)]
    stopped = train_stack(cfgs, dirs, progress=False, stop=lambda: next(polls) >= stop_at)
    assert [r.step for r in stopped] == [steps[0], stop_at] and not stopped[0].interrupted
    done_metrics = (dirs[0] / "metrics.jsonl").read_text()
    resumed = resume_stack(dirs, progress=False)
    assert (dirs[0] / "metrics.jsonl").read_text() == done_metrics
    for run, done in zip(resumed, whole):
        assert run.step == done.step and all(
            torch.equal(run.model.state_dict()[k], v) for k, v in final_state(done).items()
        )
    assert json.loads((dirs[1] / "metrics.jsonl").read_text().splitlines()[-1])["loss"] == whole[1].metrics[-1]["loss"]


def test_a_non_finite_loss_is_named_at_its_own_step_when_another_run_is_done(tmp_path, monkeypatch):
    """Losses are read at the next log, not at each step; the message still names the step whose loss was not
    finite, counted by the runs still training (run 0 stopped at step 4), and the run it belongs to."""
    import ictd_interp.training.stacked as stacked_module
    from ictd_interp.training.trainer import TrainingDiverged

    cfgs = [TrainConfig.from_preset("quick", seed=s, **{**SMALL, "steps": n}) for s, n in enumerate((4, 20))]
    real, calls = stacked_module.registered_objective, iter(range(1, 10**6))

    def poisoned(name):
        objective = real(name)

        def loss(stack, batch, depth=None):
            losses = objective(stack, batch, depth)
            return losses * torch.tensor([1.0, float("nan")]) if next(calls) == 11 else losses

        return loss

    monkeypatch.setattr(stacked_module, "registered_objective", poisoned)
    with pytest.raises(
        TrainingDiverged, match=r"non-finite loss at step 11 of \S*p1 \(nan; last good checkpoint: \S*8"
    ):
        train_stack(cfgs, [tmp_path / "p0", tmp_path / "p1"], progress=False)


def test_a_device_sampled_stack_draws_once_per_step_and_each_run_reaches_its_own_runs_weights(tmp_path, monkeypatch):
    """``sampler = "device"``: one call draws every run's batch (no run's own stream is read), each run reaches the
    weights of its run alone, and a run stopped and resumed reaches them too (its draws depend on the step only)."""
    from ictd_interp.training.batch_stream import BatchStream
    from ictd_interp.training.device_stream import DeviceBatches

    cfgs = [
        TrainConfig.from_preset("quick", seed=s, sampler="device", **{**SMALL, **c}) for s, c in enumerate(CONDITIONS)
    ]
    calls = []
    real_at = DeviceBatches.at
    monkeypatch.setattr(DeviceBatches, "at", lambda self, step: calls.append(len(self.configs)) or real_at(self, step))
    monkeypatch.setattr(BatchStream, "__next__", lambda self: pytest.fail("a host stream was read"))
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(4)], progress=False)
    assert calls and set(calls) == {4}  # one draw for the four runs, each step
    for i, (config, run) in enumerate(zip(cfgs, stacked)):
        alone = train(config, tmp_path / f"a{i}", progress=False)
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, (i, name)
    import itertools

    polls = itertools.count()
    half = train(cfgs[2], tmp_path / "half", progress=False, stop=lambda: next(polls) >= 6)
    assert half.interrupted and 0 < half.step < cfgs[2].steps
    resumed = resume(tmp_path / "half", progress=False)
    for name, weight in final_state(stacked[2]).items():
        assert rel(resumed.model.state_dict()[name], weight) < 1e-11, name


def test_depth_sampled_runs_drawing_on_the_device_share_a_stack_each_reaching_its_own_runs_weights(tmp_path):
    """The device sampler draws a step's depth from the step alone: two runs of other seeds and rates run the same
    depths in one stack and alone (the host sampler's stack is still refused, naming why)."""
    from ictd_interp.training.device_stream import DeviceBatches

    first, second = configs(seeds=(0, 1), sampler="device", train_depths="1:3", steps=12)
    cfgs = [first, replace(second, lr=3e-3)]
    depths = [DeviceBatches([cfgs[0]], torch.float64).depth(s) for s in range(12)]
    assert set(depths) == {1, 2, 3}  # sampled, not fixed
    stacked = train_stack(cfgs, [tmp_path / "s0", tmp_path / "s1"], progress=False)
    for i, (config, run) in enumerate(zip(cfgs, stacked)):
        alone = train(config, tmp_path / f"a{i}", progress=False)
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, (i, name)
    with pytest.raises(ValueError, match="depth-sampled runs draw each step's depth per run"):
        train_stack([replace(c, sampler="host") for c in cfgs], [tmp_path / "h0", tmp_path / "h1"], progress=False)


def test_runs_of_other_objectives_drawing_on_the_device_share_a_stack_each_reaching_its_own_runs_weights(tmp_path):
    """td, neu, mc (a 4-step horizon: longer trajectories) and supervised runs in one stack: the batch holds every
    objective's needs, each model's loss is its own run's objective's, and each reaches its run alone's weights. With
    the host sampler, or two kinds of true values, the stack is refused, naming why."""
    objectives = ("td", "neu", "mc", "supervised")
    cfgs = [
        TrainConfig.from_preset("quick", seed=s, sampler="device", objective=o, mc_horizon=4, **{**SMALL, "steps": 8})
        for s, o in enumerate(objectives)
    ]
    stacked = train_stack(cfgs, [tmp_path / f"s{o}" for o in objectives], progress=False)
    for config, run in zip(cfgs, stacked):
        alone = train(config, tmp_path / f"a{config.objective}", progress=False)
        for name, weight in final_state(alone).items():
            assert rel(run.model.state_dict()[name], weight) < 1e-11, (config.objective, name)
        assert run.metrics[-1]["loss"] == pytest.approx(alone.metrics[-1]["loss"], rel=1e-11)
    with pytest.raises(ValueError, match=r"differs from configs\[0\] beyond .*objective: 'td' -> 'neu'"):
        train_stack([replace(c, sampler="host") for c in cfgs[:2]], [tmp_path / "h0", tmp_path / "h1"], progress=False)


def test_a_resumed_stacks_optimiser_state_lands_on_the_stacks_device_and_dtype(tmp_path):
    """Resumed runs load their optimiser state on the CPU; the stack's state must follow its parameters' device, not
    only their dtype (a GPU stack otherwise crashes at its first step). The stack is moved to ``meta``, a device
    other than the CPU the state was loaded on, so the check fails on a CPU-only machine too."""
    from ictd_interp.models.stylised.stack import ModelStack
    from ictd_interp.training.stacked import _stack_optimizer_state, reopen_stack
    from ictd_interp.training.trainer import make_optimizer

    polls = iter(range(10**6))
    dirs = [tmp_path / f"q{i}" for i in range(2)]
    train_stack(configs(seeds=(0, 1)), dirs, progress=False, stop=lambda: next(polls) >= 10)
    loops = reopen_stack(dirs)
    stack = ModelStack([loop.run.model for loop in loops]).to("meta")
    optimizer = make_optimizer(loops[0].run.config, stack)
    _stack_optimizer_state(stack, optimizer, loops)
    for param in stack.parameters():
        moments = [t for t in optimizer.state[param].values() if torch.is_tensor(t) and t.shape == param.shape]
        assert len(moments) == 2 and all(t.device == param.device and t.dtype == param.dtype for t in moments)
