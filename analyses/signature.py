"""Signature across models: the per-model value-row signature lives in ``ictd_interp.metrics``."""

from __future__ import annotations

from typing import Sequence

from ictd_interp import HookedICTDTransformer
from ictd_interp.metrics import value_signature


def fraction_matching(models: Sequence[HookedICTDTransformer]) -> float:
    """Fraction of (model, layer) pairs whose identifiable entries have the signs (+, +, -)."""
    rows = [row["matches"] for m in models for row in value_signature(m, m.cfg)]
    return sum(rows) / len(rows)
