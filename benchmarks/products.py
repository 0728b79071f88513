"""The matrix products of a step, recorded and replayed alone: the floor under a step's time.

``with MatrixProducts() as products: step()`` records every ``mm``, ``bmm``, ``addmm`` and ``baddbmm``
the step dispatches (forward and backward; on any device) with copies of its operands;
``products.replay()`` runs them again, back to back, and nothing else. A step cannot take less than its
products unless the products themselves change (their shapes, or their count); what it takes beyond
them is everything else: softmax, GELU, LayerNorm, copies, dispatch overhead. Used by
``train_throughput.py`` and, through ``PYTHONPATH``, by ``against.py`` in both trees (it needs torch alone).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

PRODUCTS = ("mm", "bmm", "addmm", "baddbmm")


class MatrixProducts(TorchDispatchMode):
    """Records the matrix products run under it; ``flops``: ``2 M K N`` per matrix (per batch entry for
    ``bmm``/``baddbmm``), the additions of ``addmm``'s bias left out; ``replay()`` runs them again."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in PRODUCTS:
            operands = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            self.calls.append((func, operands, kwargs))
        return func(*args, **kwargs)

    @property
    def flops(self) -> float:
        return sum(2.0 * args[-2].numel() * args[-1].shape[-1] for _, args, _ in self.calls)

    def replay(self) -> None:
        for func, args, kwargs in self.calls:
            func(*args, **kwargs)
