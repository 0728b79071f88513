"""The paper's headline claim, reproduced by default: the quick preset makes theta* emerge."""

import pytest

from ictd_interp.training.trainer import train
from ictd_interp.config.train import TrainConfig


@pytest.mark.slow
def test_quick_preset_reaches_theta_star(tmp_path):
    run = train(TrainConfig.from_preset("quick", seed=0), tmp_path / "quick", progress=False)
    final = run.metrics[-1]
    assert min(final["cos_V"]) >= 0.95
    assert min(final["cos_A"]) >= 0.95
    assert all(final["signature_match"])
    assert final["eval_msve"] <= 1.5 * final["theta_star_msve"]
