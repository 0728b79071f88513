"""Shared by tests/*/test_registry.py."""

import warnings

from ictd_interp.io import pretrained
from ictd_interp.training.retraining import retrain

NAMES = pretrained.names()


def _check_retrain(name, tmp_path, steps=None):
    result = retrain(name, tmp_path / name, steps=steps)
    how = (
        "bit for bit (this machine's fingerprint equals the card's)"
        if result["mode"] == "bit-exact"
        else f"within {result['tolerance']:g} of the largest weight "
        f"(fingerprint differs: {'; '.join(result['differences'])})"
    )
    warnings.warn(
        f"{name}: retrain compared {how}; max |dw| {result['max_abs']:.3g} ({result['max_rel']:.3g} relative)",
        stacklevel=2,
    )
    assert result["passes"], result
