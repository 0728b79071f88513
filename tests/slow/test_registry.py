"""Shipped pretrained models: they load, their cards tell the truth, and their commands reproduce them."""

import pytest

from tests.support.registry import NAMES, _check_retrain


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_model_is_reproduced_by_its_recorded_config(name, tmp_path):
    _check_retrain(name, tmp_path)
