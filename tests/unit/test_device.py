"""float32 on a device against the float64 CPU reference, within 1e-4 of the reference's scale: the hooked forward
(full and over query chunks) of both architectures, and the fast path's gradients (fused backward).

The device is ``ICTD_TEST_DEVICE`` (``benchmarks/device_checks.py --device cuda`` sets it on a GPU machine); by
default the CPU, where the same checks hold float32 against float64.
"""

import os

import pytest
import torch

from ictd_interp import HookedICTDTransformer, HookedStandardTransformer, ICTDConfig
from ictd_interp.config import TaskDistribution
from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.chunked_attention import QUERY_CHUNK
from ictd_interp.tasks.sampling import sample_tasks
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import td_loss

DEVICE = os.environ.get("ICTD_TEST_DEVICE", "cpu")
TOL = 1e-4  # float32 against float64, relative to the reference's largest magnitude

pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA device")


def _models():
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=3, dtype="float64"))
    standard = HookedStandardTransformer(
        StandardConfig(d_features=4, d_model=16, n_heads=2, n_layers=2, d_mlp=32, dtype="float64", seed=3)
    )
    return {"stylised": star, "standard": standard}


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    scale = max(1.0, float(want.abs().max()))
    assert float((got.double().cpu() - want).abs().max()) <= TOL * scale


@pytest.mark.parametrize("architecture", ["stylised", "standard"])
@pytest.mark.parametrize("n", [30, QUERY_CHUNK + 76], ids=["full", "query-chunks"])
def test_the_forward_on_the_device_matches_the_float64_cpu_reference(architecture, n):
    model = _models()[architecture]
    prompt = sample_tasks(2, 8, 4, n, 0.9, seed=1).prompt
    with torch.no_grad():
        want = model(prompt)
        got = model.to(torch.float32).to(DEVICE)(prompt.float().to(DEVICE))
    assert got.device.type == DEVICE
    _close(got, want)


def test_the_fused_backward_on_the_device_matches_the_float64_cpu_gradients():
    cfg = ICTDConfig(d_features=4, n_layers=3, tied=False, dtype="float64", init_scale=0.3, seed=5)
    dist = TaskDistribution(d_features=4, context_len=20)
    batch = window_batch(dist, 8, 4, generator=torch.Generator().manual_seed(2))
    grads = {}
    for dtype, device in ((torch.float64, "cpu"), (torch.float32, DEVICE)):
        model = HookedICTDTransformer(cfg).to(dtype).to(device)
        td_loss(model, batch.to(device, dtype)).backward()
        grads[device if dtype == torch.float32 else "reference"] = [p.grad for p in model.parameters()]
    for got, want in zip(grads[DEVICE], grads["reference"]):
        _close(got, want)


def test_a_stack_on_the_device_matches_each_models_float64_cpu_gradients():
    from ictd_interp.models.stylised.stack import ModelStack
    from ictd_interp.training.batches import WindowBatch

    cfg = ICTDConfig(d_features=4, n_layers=3, tied=False, dtype="float64", init_scale=0.3)
    dist = TaskDistribution(d_features=4, context_len=20)
    batches = [window_batch(dist, 4, 4, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    models = [HookedICTDTransformer(ICTDConfig.from_dict({**cfg.to_dict(), "seed": s})) for s in range(3)]
    wants = []
    for model, batch in zip(models, batches):
        td_loss(model, batch).backward()
        # copies: moving a module moves its gradients in place, so held references would follow it to the device
        wants.append([(a.A.grad.clone(), a.V.grad.clone()) for a in model.unique_attention()])
    stack = ModelStack([m.to(torch.float32).to(DEVICE) for m in models])
    td_loss(stack, WindowBatch.stack([b.to(DEVICE, torch.float32) for b in batches])).sum().backward()
    assert stack.A.device.type == DEVICE
    for i, want in enumerate(wants):
        for u, (grad_A, grad_V) in enumerate(want):
            _close(stack.A.grad[i, u], grad_A)
            _close(stack.V.grad[i, u], grad_V)
