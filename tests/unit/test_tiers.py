"""The unit tier holds no optimisation (tests/conftest.py): building an optimiser in a unit test fails it."""

import pytest
import torch


def test_building_an_optimiser_in_a_unit_test_is_refused():
    with pytest.raises(RuntimeError, match="builds a torch.optim optimiser; it belongs in tests/integration"):
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
