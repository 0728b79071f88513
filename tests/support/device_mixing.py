"""Shared by tests/*/test_device_mixing.py."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

FAKE = torch.device("meta")


class FakeAccelerator(TorchDispatchMode):
    """Fails an operation whose tensor arguments (a 0-dim CPU scalar aside, as torch allows) span two devices;
    a copy from the stand-in device to the CPU gives zeros and a value read 0 (a boolean check True) instead of failing
    for lack of data."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            raise RuntimeError(f"device mixing in {func}: {sorted(map(str, devices))}")
        source = tensors[0] if tensors else None
        if source is not None and source.device == FAKE:
            if func is torch.ops.aten._local_scalar_dense.default:
                return True if source.dtype == torch.bool else 0  # a check passes, a number reads 0
            if func is torch.ops.aten._to_copy.default and torch.device(kwargs.get("device", FAKE)).type == "cpu":
                return torch.zeros(source.shape, dtype=kwargs.get("dtype") or source.dtype)
        return func(*args, **kwargs)
