"""The value-weight signature (SPEC §7): does the current-value row read ``R + gamma v' - v``?"""

from __future__ import annotations

from typing import Sequence

from ictd_interp import HookedICTDTransformer
from ictd_interp.metrics import SIGNATURE_SIGNS, identifiable_inputs, value_signature

__all__ = ["value_signature", "identifiable_inputs", "SIGNATURE_SIGNS", "fraction_matching"]


def fraction_matching(models: Sequence[HookedICTDTransformer]) -> float:
    """Fraction of (model, layer) pairs whose identifiable entries have the signs (+, +, -)."""
    rows = [row["matches"] for m in models for row in value_signature(m, m.cfg)]
    return sum(rows) / len(rows)
