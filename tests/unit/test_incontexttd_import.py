"""Models trained with the predecessor's code (InContextTD) imported: logs and state dicts written in its file
formats, predictions equal to its model's, the run's own tasks carried, and every importer error named."""

import pytest
import torch

D, N, GAMMA = 3, 12, 0.9


def write_incontexttd_log(
    folder, d=D, n=N, layers=3, mode="auto", logged=4, activation="identity", seed=0, params=True
):
    """A log in the file format InContextTD's trainer writes (re-implemented from its description: ``np.savez``
    of the logged lists, ``P``/``Q`` one ``[layers, 2d+1, 2d+1]`` stack per logged step, ``params.json``)."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    stored = 1 if mode == "auto" else layers
    P = rng.normal(size=(logged, stored, 2 * d + 1, 2 * d + 1)).astype(np.float32) * 0.3
    Q = rng.normal(size=(logged, stored, 2 * d + 1, 2 * d + 1)).astype(np.float32) * 0.3
    folder.mkdir(parents=True, exist_ok=True)
    steps = np.arange(1, logged + 1)
    np.savez(
        folder / "data.npz",
        xs=steps * 10,
        alpha=1 + steps / 100,
        P=P,
        Q=Q,
        **{
            "v_tf v_td msve": steps / 1000,
            "implicit_weight_sim": 0.9 + steps / 1000,
            "sensitivity cos sim": 0.8 + steps / 1000,
        },
    )
    if params:
        (folder / "params.json").write_text(
            json.dumps(
                {
                    "d": d,
                    "s": 6,
                    "n": n,
                    "l": layers,
                    "gamma": GAMMA,
                    "activation": activation,
                    "mode": mode,
                    "lr": 0.001,
                }
            )
        )
    return P, Q


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
