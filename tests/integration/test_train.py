import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.run_folder import read_metrics
from ictd_interp.training import objectives
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import objective as registered_objective
from ictd_interp.training.trainer import TrainingDiverged, resume, train


def tiny(**overrides) -> TrainConfig:
    base = dict(
        d_features=3,
        n_states=5,
        context_len=6,
        tasks_per_batch=4,
        windows_per_task=3,
        steps=6,
        eval_every=2,
        checkpoint_every=3,
        n_eval_tasks=8,
        n_layers=2,
        lr=1e-2,
    )
    return TrainConfig.from_flat(**{**base, **overrides})


def without_wall(metrics):
    return [{k: v for k, v in m.items() if k != "wall_time"} for m in metrics]


def weights(path):
    return HookedICTDTransformer.from_pretrained(path).state_dict()


def assert_same_weights(a, b):
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_seeded_runs_are_identical(tmp_path):
    a = train(tiny(), tmp_path / "a", progress=False)
    train(tiny(), tmp_path / "b", progress=False)
    assert without_wall(read_metrics(tmp_path / "a")) == without_wall(read_metrics(tmp_path / "b"))
    assert [m["step"] for m in a.metrics] == [0, 2, 4, 6]
    assert_same_weights(weights(tmp_path / "a" / "final"), weights(tmp_path / "b" / "final"))
    c = train(tiny(seed=1), tmp_path / "c", progress=False)
    assert not torch.equal(c.model.blocks[0].attn.V, a.model.blocks[0].attn.V)


def test_resume_reaches_the_same_weights(tmp_path):
    train(tiny(), tmp_path / "full", progress=False)
    shutil.copytree(tmp_path / "full", tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "final")
    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "step_0000006")
    run = resume(tmp_path / "cut", progress=False)
    assert run.step == 6 and not run.interrupted
    assert_same_weights(weights(tmp_path / "full" / "final"), weights(tmp_path / "cut" / "final"))
    assert without_wall(read_metrics(tmp_path / "full")) == without_wall(read_metrics(tmp_path / "cut"))


def test_a_penalised_run_resumes_bit_for_bit_and_the_penalty_moves_the_weights(tmp_path):
    """The spectral penalty (state-space forward, tied): cut at its checkpoint and resumed, the same weights and
    metrics; without the penalty other weights (its gradient reaches the layer)."""
    config = tiny(forward="state-space", spectral_penalty=1.0, tied=True)
    train(config, tmp_path / "full", progress=False)
    shutil.copytree(tmp_path / "full", tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "final")
    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "step_0000006")
    assert resume(tmp_path / "cut", progress=False).step == 6
    assert_same_weights(weights(tmp_path / "full" / "final"), weights(tmp_path / "cut" / "final"))
    assert without_wall(read_metrics(tmp_path / "full")) == without_wall(read_metrics(tmp_path / "cut"))
    plain = train(replace(config, spectral_penalty=0.0), tmp_path / "plain", progress=False)
    penalised = HookedICTDTransformer.from_pretrained(str(tmp_path / "full" / "final"))
    assert not torch.equal(plain.model.blocks[0].attn.V, penalised.blocks[0].attn.V)


def test_ctrl_c_leaves_a_checkpoint_and_resume_finishes(tmp_path, monkeypatch):
    original = objectives.td_loss  # the trainer reads the registry's ``module:function`` name at each step
    calls = {"n": 0}

    def interrupting(model, batch, depth=None):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return original(model, batch)

    monkeypatch.setattr(objectives, "td_loss", interrupting)
    run = train(tiny(steps=8, checkpoint_every=4), tmp_path / "r", progress=False)
    assert run.interrupted and run.step == 2
    assert (tmp_path / "r" / "checkpoints" / "step_0000002").exists()
    monkeypatch.setattr(objectives, "td_loss", original)
    resume(tmp_path / "r", progress=False)
    train(tiny(steps=8, checkpoint_every=4), tmp_path / "ref", progress=False)
    assert_same_weights(weights(tmp_path / "r" / "final"), weights(tmp_path / "ref" / "final"))


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    original = objectives.td_loss
    calls = {"n": 0}

    def diverging(model, batch, depth=None):
        calls["n"] += 1
        loss = original(model, batch)
        return loss * float("nan") if calls["n"] == 5 else loss

    monkeypatch.setattr(objectives, "td_loss", diverging)
    with pytest.raises(TrainingDiverged, match="step 5.*step_0000003"):
        train(tiny(), tmp_path / "r", progress=False)
    good = HookedICTDTransformer.from_pretrained(tmp_path / "r" / "checkpoints" / "step_0000003")
    assert all(torch.isfinite(p).all() for p in good.parameters())


@pytest.mark.parametrize("objective", ["td", "neu", "mc", "supervised"])
def test_every_objective_trains_and_keeps_masks(tmp_path, objective):
    run = train(tiny(objective=objective, steps=3, eval_every=3), tmp_path / objective, progress=False)
    for block in run.model.blocks:
        assert (block.attn.A[block.attn.mask_A == 0] == 0).all()
        assert (block.attn.V[block.attn.mask_V == 0] == 0).all()
    assert json.loads((tmp_path / objective / "train_config.json").read_text())["objective"] == objective


def test_existing_run_is_not_clobbered(tmp_path):
    train(tiny(steps=1), tmp_path / "r", progress=False)
    with pytest.raises(FileExistsError, match="resume"):
        train(tiny(steps=1), tmp_path / "r", progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where no GPU exists")
def test_cuda_without_a_gpu_is_a_clear_error(tmp_path):
    config = TrainConfig.from_flat(device="cuda")  # a config is a plain value: nothing probed when it is built
    with pytest.raises(ValueError, match="device: 'cuda' requested"):
        train(config, tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()  # refused before anything was written


@pytest.mark.parametrize("objective", ["td", "neu", "mc", "supervised"])
@pytest.mark.parametrize("architecture", ["stylised", "standard"])
def test_each_objective_lowers_its_loss_on_a_fixed_batch(objective, architecture):
    from ictd_interp.models.registry import build_model

    arch = (
        {"architecture": "standard", "d_model": 8, "d_mlp": 8, "init_range": 0.1}
        if architecture == "standard"
        else {"init_scale": 0.3}
    )
    cfg = tiny(objective=objective, dtype="float64", **arch)
    model = build_model(cfg.model)
    batch = window_batch(cfg.tasks, 8, 5, generator=torch.Generator().manual_seed(0), mc_horizon=cfg.mc_horizon)
    batch = batch.to("cpu", torch.float64)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2 if architecture == "stylised" else 3e-3)
    before = registered_objective(objective)(model, batch).item()
    for _ in range(60):
        opt.zero_grad()
        registered_objective(objective)(model, batch).backward()
        opt.step()
    after = registered_objective(objective)(model, batch).item()
    # semi-gradient TD chases a moving target, so its loss falls less; a wrong sign or a detached path fails both
    assert after < (0.9 if objective == "td" else 0.7) * before, (before, after)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_short_cuda_run_matches_the_cpu_run(tmp_path):
    cpu = train(tiny(steps=20, eval_every=10), tmp_path / "cpu", progress=False)
    cuda = train(tiny(steps=20, eval_every=10, device="cuda"), tmp_path / "cuda", progress=False)
    for a, b in zip(cpu.model.parameters(), cuda.model.parameters()):
        assert (a.detach() - b.detach().cpu()).abs().max() < 1e-4


COMPILED = """
import json, sys, tempfile
import torch
from ictd_interp.config import TrainConfig
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.io.run_folder import load_run_config
from ictd_interp.training.trainer import train
base = dict(d_features=3, n_states=5, context_len=6, tasks_per_batch=4, windows_per_task=3, steps=6, eval_every=3,
            checkpoint_every=3, n_eval_tasks=8, n_layers=2, lr=1e-2, dtype="float64", architecture=sys.argv[1])
out = tempfile.mkdtemp()
eager = train(TrainConfig.from_flat(**base), out + "/eager", progress=False).model
compiled = train(TrainConfig.from_flat(**base, compile=True), out + "/compiled", progress=False).model
seen = []
compiled.blocks[0].hook_resid_pre.add_hook(lambda act, hook: seen.append(hook.name))
compiled.fast_values(sample_from(TrainConfig.from_flat(**base).tasks, 2, seed=1).prompt)
print(json.dumps({"recorded": load_run_config(out + "/compiled").compile,
                  "own_callable": compiled.hook_free_values is not type(compiled).hook_free_values,
                  "hooked": seen,
                  "max_diff": max((a - b).abs().max().item() for a, b in
                                  zip(eager.state_dict().values(), compiled.state_dict().values()))}))
"""


@pytest.mark.parametrize("architecture", ["stylised", pytest.param("standard", marks=pytest.mark.slow)])
def test_the_compile_option_trains_the_same_weights_within_rounding(architecture):
    """``compile=True`` runs the compiled hook-free path (another rounding; float64 here: within 1e-9), is
    recorded in the run's config, and a hook still diverts the compiled model to the hooked forward. In a
    fresh interpreter: the suite's runtime type checks wrap the functions torch.compile would trace."""
    done = subprocess.run([sys.executable, "-c", COMPILED, architecture], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["recorded"] and result["own_callable"] and result["hooked"] == ["blocks.0.hook_resid_pre"]
    assert 0 <= result["max_diff"] < 1e-9


ALLOCATOR = """
import os, sys
from ictd_interp.config import TrainConfig
from ictd_interp.training.allocator import keep_freed_memory
from ictd_interp.training.trainer import train
config = TrainConfig.from_flat(steps=1, tasks_per_batch=2, windows_per_task=1, n_eval_tasks=2, context_len=4)
train(config, sys.argv[1] + "/a", progress=False)
untouched = keep_freed_memory.cache_info().currsize == 0
train(config, sys.argv[1] + "/b", progress=False, keep_freed_memory=True)
print(untouched, keep_freed_memory.cache_info().currsize == 1 and keep_freed_memory())
"""


@pytest.mark.parametrize("env", [None, "1"])
def test_the_allocator_setting_is_never_made_unasked(tmp_path, env):
    """``train()`` leaves the process's allocator alone unless asked (argument or environment variable);
    asked, glibc takes the setting (Linux). benchmarks/allocator.py measures what it buys."""
    environ = {k: v for k, v in os.environ.items() if k != "ICTD_INTERP_KEEP_FREED_MEMORY"}
    if env is not None:
        environ["ICTD_INTERP_KEEP_FREED_MEMORY"] = env
    out = subprocess.run(
        [sys.executable, "-c", ALLOCATOR, str(tmp_path)], capture_output=True, text=True, check=True, env=environ
    )
    untouched, applied = out.stdout.split()
    assert untouched == ("False" if env == "1" else "True")
    assert applied == str(sys.platform.startswith("linux"))


# A run folder's train_config.json as the release before the nesting wrote it: one flat dict of 36 fields.
LEGACY_FLAT = {
    "architecture": "stylised",
    "objective": "td",
    "d_features": 4,
    "n_layers": 3,
    "form": "tsm",
    "attention": "softmax",
    "tied": True,
    "mask": "paper",
    "init_scale": 0.01,
    "d_model": 32,
    "n_heads": 2,
    "d_mlp": 64,
    "layer_norm": True,
    "pos_embed": False,
    "dtype": "float32",
    "family": "boyan",
    "n_states": 10,
    "context_len": 12,
    "gamma": 0.9,
    "feature_kind": "uniform",
    "feature_scale": 1.0,
    "terminal": "restart",
    "tasks_per_batch": 4,
    "windows_per_task": 2,
    "steps": 4,
    "lr": 0.003,
    "weight_decay": 1e-06,
    "optimizer": "adam",
    "mc_horizon": 40,
    "train_depths": "",
    "seed": 5,
    "eval_seed": 20260529,
    "n_eval_tasks": 4,
    "eval_every": 2,
    "checkpoint_every": 2,
    "device": "cpu",
}


def test_a_run_folder_of_the_flat_layout_is_read_and_resumed(tmp_path):
    config = TrainConfig.from_dict(LEGACY_FLAT)
    assert (config.model.tied, config.model.seed, config.seed, config.tasks.context_len) == (True, 5, 5, 12)
    assert config.to_dict()["model"] == {
        "d_features": 4,
        "n_layers": 3,
        "gamma": 0.9,
        "form": "tsm",
        "attention": "softmax",
        "tied": True,
        "mask": "paper",
        "init_scale": 0.01,
        "dtype": "float32",
        "seed": 5,
        "backward": "autograd",
    }  # written before the field existed
    whole = train(config, tmp_path / "whole", progress=False)
    half = train(replace(config, steps=2), tmp_path / "old", progress=False)
    assert half.step == 2
    (tmp_path / "old" / "train_config.json").write_text(json.dumps(LEGACY_FLAT))  # as the old release left it
    assert TrainConfig.from_dict(json.loads((tmp_path / "old" / "train_config.json").read_text())) == config
    resumed = resume(tmp_path / "old", progress=False)
    assert resumed.step == 4
    for a, b in zip(whole.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
    standard = TrainConfig.from_dict(
        {**LEGACY_FLAT, "architecture": "standard", "form": "tsm", "init_scale": 0.1, "tied": False}
    )
    assert (standard.model.init_range, standard.model.n_ctx, standard.model.d_model) == (0.1, 13, 32)
    with pytest.raises(ValueError, match="unknown field"):
        TrainConfig.from_dict({**LEGACY_FLAT, "learning_rate": 1.0})
    with pytest.raises(ValueError, match="'model' and 'tasks' tables"):
        TrainConfig.from_dict({"model": config.to_dict()["model"]})


def test_a_compiled_run_sampling_depths_keeps_a_graph_for_each_depth():
    """Each depth is its own compiled graph; torch keeps 8 before falling back to eager for good, so a run sampling
    12 depths raises the limit to hold them all (``trainer.allow_graphs``); an eager run leaves it alone."""
    import torch._dynamo

    from ictd_interp.models.registry import build_model
    from ictd_interp.training.trainer import depths_trained, prepare_model

    limit = torch._dynamo.config.recompile_limit
    try:
        sampled = TrainConfig.from_preset("quick", train_depths="1:12")
        assert depths_trained(sampled) == tuple(range(1, 13))
        prepare_model(build_model(sampled.model), sampled)  # eager: nothing changes
        assert torch._dynamo.config.recompile_limit == limit
        compiled = replace(sampled, compile=True)
        prepare_model(build_model(compiled.model), compiled)
        assert torch._dynamo.config.recompile_limit >= 12 > limit
    finally:
        torch._dynamo.config.recompile_limit = limit
