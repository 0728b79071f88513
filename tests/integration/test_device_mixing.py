"""Device mixing, caught on a CPU-only machine: every training path (one run, a stack across conditions, a resumed
run, a resumed stack, each objective, the state-space forward) and the training-time metrics run with every model
on a stand-in accelerator (torch's ``meta`` device, data-free), under a dispatch mode that fails any operation whose
tensor arguments lie on two devices. Reads back to the CPU (``.cpu()``, ``.item()``) return zeros, so code that
reads its numbers on the CPU runs through; only mixing fails. Each path is also run with a device bug injected (a
batch, a loss term or a metric left on the CPU) and must fail: a check that cannot fail checks nothing. On a GPU
the same code runs on ``cuda`` (benchmarks/device_checks.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import ictd_interp.config.train as train_config
from ictd_interp.config.registry import Objective
from ictd_interp.config.train import TrainConfig
from ictd_interp.training import evaluation
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.device_stream import DeviceBatches
from ictd_interp.training.stacked import resume_stack, train_stack
from ictd_interp.training.trainer import resume, train
from tests.support.device_mixing import FAKE, FakeAccelerator

TINY = dict(steps=4, n_layers=2, tasks_per_batch=2, windows_per_task=2, n_eval_tasks=4, eval_every=2)
SETTINGS = {  # objective -> (preset, settings)
    "td": ("quick", {}),
    "neu": ("quick", {}),
    "mc": ("quick", {"mc_horizon": 4}),
    "supervised": ("quick", {}),
    "q-learning": ("control-quick", {}),
    "td, state-space forward": ("quick", {"forward": "state-space"}),
    "td, standard model": ("standard-quick", {}),
    "td, drawn on the device": ("quick", {"sampler": "device", "task_pool": 3, "shuffle_rewards": True}),
}


def fake_config(case: str, **settings) -> TrainConfig:
    preset, own = SETTINGS[case]
    objective = {"objective": case.split(",")[0]}
    return TrainConfig.from_preset(
        preset, **{**TINY, **objective, **own, "device": FAKE.type, "optimizer_kernel": "foreach", **settings}
    )  # no fused optimiser kernel for meta tensors


def stop_after(steps: int):
    polls = iter(range(10**6))
    return lambda: next(polls) >= steps


def run_path(path: str, case: str, tmp) -> None:
    config = fake_config(case)
    other = replace(config, seed=1, model=replace(config.model, seed=1), lr=2 * config.lr, steps=3)  # another condition
    if path == "train":
        train(config, tmp / "t", progress=False)
    elif path == "stack":
        train_stack([config, other], [tmp / "s0", tmp / "s1"], progress=False)
    elif path == "resume":
        train(config, tmp / "r", progress=False, stop=stop_after(2))
        assert resume(tmp / "r", progress=False).step == config.steps
    elif path == "resume-stack":
        train_stack([config, other], [tmp / "q0", tmp / "q1"], progress=False, stop=stop_after(2))
        assert [r.step for r in resume_stack([tmp / "q0", tmp / "q1"], progress=False)] == [4, 3]


def stackable(path: str, case: str) -> bool:
    return "stack" not in path or case in ("td", "neu", "mc", "supervised", "q-learning", "td, drawn on the device")


def on_cpu(batch, depth, dtype):
    return batch.to("cpu", dtype), depth


BUGS = {  # a device bug of each kind: where it is put, and what it does
    "batch left on the CPU": (BatchStream, "__next__", lambda f: lambda self: on_cpu(*f(self), self.dtype)),
    "a loss term made on the CPU": (Objective, "__call__", lambda f: lambda *a, **k: f(*a, **k) + torch.zeros(1)),
    "a metric read on the device": (
        evaluation,
        "value_msve",
        lambda f: lambda values, tasks: float((values.double() - tasks.v_true).pow(2).mean()),
    ),
}
CASES = [(p, c) for p in ("train", "stack", "resume", "resume-stack") for c in SETTINGS if stackable(p, c)]
DRAWN_ON_THE_CPU = (DeviceBatches, "at", lambda f: lambda self, step: f(self, step).to("cpu", self.dtype))


@pytest.fixture(autouse=True)
def meta_is_a_device(monkeypatch):
    """The configs accept cpu and cuda; here the stand-in device too."""
    monkeypatch.setattr(train_config, "DEVICES", (*train_config.DEVICES, FAKE.type))


@pytest.mark.parametrize("path,case", CASES)
def test_every_training_path_keeps_to_the_models_device(tmp_path, path, case):
    with FakeAccelerator():
        run_path(path, case, tmp_path)


@pytest.mark.parametrize("bug", sorted(BUGS))
@pytest.mark.parametrize("path", ["train", "stack", "resume", "resume-stack"])
def test_each_path_fails_on_each_injected_device_bug(tmp_path, monkeypatch, path, bug):
    owner, name, inject = BUGS[bug]
    monkeypatch.setattr(owner, name, inject(getattr(owner, name)))
    with FakeAccelerator(), pytest.raises(RuntimeError, match="device mixing"):
        run_path(path, "td", tmp_path)


@pytest.mark.parametrize("path", ["train", "stack", "resume", "resume-stack"])
def test_each_path_drawing_on_the_device_fails_on_draws_left_on_the_cpu(tmp_path, monkeypatch, path):
    owner, name, inject = DRAWN_ON_THE_CPU
    monkeypatch.setattr(owner, name, inject(getattr(owner, name)))
    with FakeAccelerator(), pytest.raises(RuntimeError, match="device mixing"):
        run_path(path, "td, drawn on the device", tmp_path)


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_every_objective_fails_on_a_loss_term_left_on_the_cpu(tmp_path, monkeypatch, case):
    owner, name, inject = BUGS["a loss term made on the CPU"]
    monkeypatch.setattr(owner, name, inject(getattr(owner, name)))
    with FakeAccelerator(), pytest.raises(RuntimeError, match="device mixing"):
        run_path("train", case, tmp_path)


def test_a_tied_model_moved_to_the_stand_in_device_keeps_one_layer_and_its_masks():
    from ictd_interp.models.registry import build_model

    model = build_model(fake_config("td").model).to(FAKE)
    attn = [block.attn for block in model.blocks]
    assert attn[0].A is attn[1].A and len(list(model.parameters())) == 2
    assert attn[0].A.device == FAKE and attn[0].A._backward_hooks  # the gradient mask, registered again


class CountingReads(FakeAccelerator):
    """The stand-in device, counting every read of a device tensor back to the host (a value read, a copy to the
    CPU): on a GPU each is a wait for the device."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        to_cpu = func is torch.ops.aten._to_copy.default and torch.device(kwargs.get("device", FAKE)).type == "cpu"
        if (
            first is not None
            and first.device == FAKE
            and (func is torch.ops.aten._local_scalar_dense.default or to_cpu)
        ):
            self.reads += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


@pytest.mark.parametrize("sampler", ["host", "device"])
@pytest.mark.parametrize("path", ["train", "stack"])
def test_a_training_step_reads_nothing_back_from_the_device_until_it_logs(tmp_path, monkeypatch, path, sampler):
    """Losses stay on the device between logs (read once, before a log or checkpoint: ``Loop.settle``, the stack's
    ``sync``), so steps queue on a GPU without waiting; the read at the log is counted, so the count could fail."""
    from ictd_interp.training import stacked, trainer

    config = fake_config("td", steps=6, eval_every=3, checkpoint_every=3, grad_clip=1.0, sampler=sampler)
    counter, handed = CountingReads(), []
    with counter:
        if path == "train":
            loop = trainer.start_loop(config, tmp_path / "t")
            loops, step, read = [loop], (lambda: trainer._step(loop)), loop.settle
        else:  # the stack's step and sync, as step_stack hands them to drive
            monkeypatch.setattr(
                stacked, "drive", lambda loops, step, progress, stop, sync: handed.append((step, sync)) or []
            )
            loops = stacked.open_stack([config, replace(config, seed=1, lr=0.02)], [tmp_path / "a", tmp_path / "b"])
            stacked.step_stack(loops, progress=False)
            step, read = handed[0]
        counter.reads = 0
        step(), step()
        assert counter.reads == 0 and all(loop.loss_count == 0 for loop in loops)
        read()
        assert counter.reads >= 1 and all(loop.loss_count == 2 for loop in loops)
