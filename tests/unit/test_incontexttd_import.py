"""Models trained with the predecessor's code (InContextTD) imported: logs and state dicts written in its file
formats, predictions equal to its model's, the run's own tasks carried, and every importer error named."""

import pytest
import torch

from tests.support.incontexttd_import import write_incontexttd_log


def test_a_pickled_module_is_told_to_save_its_state_dict(tmp_path):
    from ictd_interp.io.incontexttd import InContextTDError, read_incontexttd

    torch.save(torch.nn.Linear(3, 3), tmp_path / "whole.pt")
    with pytest.raises(InContextTDError, match=r"state_dict\(\)") as err:
        read_incontexttd(tmp_path / "whole.pt", n_layers=2, gamma=0.9, activation="identity")
    assert "\x1b[" not in str(err.value)
    write_incontexttd_log(tmp_path / "tanh", activation="tanh")
    with pytest.raises(InContextTDError, match="implements") as err:
        read_incontexttd(tmp_path / "tanh")
    assert "softmax" not in str(err.value).split("supported:")[1]
