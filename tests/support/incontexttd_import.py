"""Shared by tests/*/test_incontexttd_import.py."""

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
