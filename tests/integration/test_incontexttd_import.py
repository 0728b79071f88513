"""Models trained with the predecessor's code (InContextTD) imported: logs and state dicts written in its file
formats, predictions equal to its model's, the run's own tasks carried, and every importer error named."""

import pytest
import torch

from tests.conftest import make_tasks
from tests.support.incontexttd_import import GAMMA, D, N, write_incontexttd_log


def trajectories():
    return make_tasks(n_tasks=3, d=D, n=N, gamma=GAMMA)


def predecessor_prediction(P, Q, prompt, gamma, activation="identity"):
    """``-Z[-1, -1]`` after ``Z <- Z + (1/n) P Z M act(Z^T Q Z)`` per layer, in its own orientation."""
    import numpy as np

    x, r = prompt[..., :D].double().numpy(), prompt[..., D].double().numpy()
    n = x.shape[1] - 1
    out = []
    for b in range(x.shape[0]):
        Z = np.zeros((2 * D + 1, n + 1))
        Z[:D, :] = x[b].T
        Z[D : 2 * D, :n] = gamma * x[b, 1:].T
        Z[-1, :n] = r[b, :n]
        M = np.eye(n + 1)
        M[-1, -1] = 0
        for Pl, Ql in zip(P, Q):
            X = Z.T @ Ql @ Z
            Z = Z + Pl @ Z @ M @ (X if activation == "identity" else np.maximum(X, 0)) / n
        out.append(-Z[-1, -1])
    return torch.tensor(out)


@pytest.mark.parametrize("mode", ["auto", "sequential"])
def test_an_incontexttd_log_imports_to_checkpoints_that_predict_as_its_model(tmp_path, mode):
    from ictd_interp.cli import main
    from ictd_interp.models.loading import load_checkpoint

    P, Q = write_incontexttd_log(tmp_path / "log", mode=mode, activation="relu")
    assert main(["import-incontexttd", str(tmp_path / "log"), "--out", str(tmp_path / "ck"), "--all-steps"]) == 0
    steps = sorted(p.name for p in (tmp_path / "ck").glob("step-*"))
    assert steps == ["step-000010", "step-000020", "step-000030", "step-000040"]
    model, meta = load_checkpoint(tmp_path / "ck" / "step-000040")
    assert model.cfg.tied == (mode == "auto") and model.cfg.n_layers == 3 and model.cfg.activation == "relu"
    assert meta["logged_step"] == 40 and meta["imported_from"]["mode"] == mode
    assert meta["their_logged"] == pytest.approx({"alpha": 1.04, "IWS": 0.904, "SS": 0.804, "VD": 0.004})
    model = model.double()
    prompt = trajectories().prompt
    layers = (
        [P[-1][0 if mode == "auto" else l] for l in range(3)],
        [Q[-1][0 if mode == "auto" else l] for l in range(3)],
    )
    expected = predecessor_prediction(
        [p.astype("float64") for p in layers[0]], [q.astype("float64") for q in layers[1]], prompt, GAMMA, "relu"
    )
    assert torch.allclose(model(prompt)[:, -1], expected, atol=1e-10, rtol=0)
    assert main(["import-incontexttd", str(tmp_path / "log" / "data.npz"), "--out", str(tmp_path / "last")]) == 0
    assert load_checkpoint(tmp_path / "last").metadata["logged_step"] == 40


def test_a_saved_state_dict_imports_with_its_depth_given(tmp_path):
    from ictd_interp.cli import main
    from ictd_interp.models.loading import load_checkpoint

    gen = torch.Generator().manual_seed(0)
    P, Q = torch.randn(2 * D + 1, 2 * D + 1, generator=gen), torch.randn(2 * D + 1, 2 * D + 1, generator=gen)
    torch.save({"attn.P": P, "attn.Q": Q}, tmp_path / "tf.pt")
    assert main(["import-incontexttd", str(tmp_path / "tf.pt"), "--out", str(tmp_path / "a")]) == 2  # depth unknown
    given = ["--gamma", "0.9", "--activation", "identity"]
    assert main(["import-incontexttd", str(tmp_path / "tf.pt"), "--n-layers", "4", "--out", str(tmp_path / "a")]) == 2
    assert (
        main(
            [
                "import-incontexttd",
                str(tmp_path / "tf.pt"),
                "--n-layers",
                "4",
                "--gamma",
                "0.9",
                "--out",
                str(tmp_path / "a"),
            ]
        )
        == 2
    )  # the activation is not in the file either: never guessed
    assert (
        main(["import-incontexttd", str(tmp_path / "tf.pt"), "--n-layers", "4", *given, "--out", str(tmp_path / "a")])
        == 0
    )
    model = load_checkpoint(tmp_path / "a").model
    assert model.cfg.tied and model.cfg.n_layers == 4 and torch.equal(model.blocks[3].attn.Q, Q)
    layers = {f"layers.{i}.{w}": torch.randn(2 * D + 1, 2 * D + 1, generator=gen) for i in range(2) for w in "PQ"}
    torch.save(layers, tmp_path / "seq.pt")
    assert main(["import-incontexttd", str(tmp_path / "seq.pt"), *given, "--out", str(tmp_path / "s")]) == 0
    model = load_checkpoint(tmp_path / "s").model
    assert not model.cfg.tied and torch.equal(model.blocks[1].attn.P, layers["layers.1.P"])


def test_anything_else_is_a_clear_error_naming_the_file(tmp_path, capsys):
    import numpy as np

    from ictd_interp.cli import main

    def error(*argv):
        assert main(["import-incontexttd", *argv]) == 2
        return capsys.readouterr().err

    assert "no such file" in error(str(tmp_path / "nothing"), "--out", str(tmp_path / "o"))
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    assert "other.npz: no P or Q entry" in error(str(tmp_path / "other.npz"), "--out", str(tmp_path / "o"))
    np.savez(tmp_path / "bad.npz", P=np.zeros((2, 1, 4, 4)), Q=np.zeros((2, 1, 4, 4)))
    assert "bad.npz: P and Q must both be [logged, layers, 2d+1, 2d+1]" in error(
        str(tmp_path / "bad.npz"), "--out", str(tmp_path / "o")
    )
    write_incontexttd_log(tmp_path / "soft", activation="softmax")
    assert "activation 'softmax' is not supported" in error(str(tmp_path / "soft"), "--out", str(tmp_path / "o"))
    write_incontexttd_log(tmp_path / "log")
    assert "gamma=0.5 contradicts the run's 0.9" in error(
        str(tmp_path / "log"), "--gamma", "0.5", "--out", str(tmp_path / "o")
    )
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    assert "junk.pt: not a torch.save'd state dict" in error(str(tmp_path / "junk.pt"), "--out", str(tmp_path / "o"))
    torch.save({"encoder.weight": torch.zeros(3)}, tmp_path / "other.pt")
    assert "neither attn.P/attn.Q" in error(str(tmp_path / "other.pt"), "--out", str(tmp_path / "o"))
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "data.npz").write_bytes((tmp_path / "log" / "data.npz").read_bytes()[:300])
    assert "cut/data.npz: not a readable .npz archive (truncated" in error(
        str(tmp_path / "cut"),
        "--n-layers",
        "3",
        "--gamma",
        "0.9",
        "--activation",
        "identity",
        "--out",
        str(tmp_path / "o"),
    )
    import json

    for key, value, says in (
        ("d", 7, "d=7 contradicts the stored matrices (7 x 7: d = 3)"),
        ("gamma", 3, "gamma must be a number in [0, 1), got 3"),
        ("gamma", "0.9", "gamma must be a number in [0, 1), got '0.9'"),
    ):
        write_incontexttd_log(tmp_path / "wrong")
        params = json.loads((tmp_path / "wrong" / "params.json").read_text())
        (tmp_path / "wrong" / "params.json").write_text(json.dumps({**params, key: value}))
        err = error(str(tmp_path / "wrong"), "--out", str(tmp_path / "o"))
        assert f"{tmp_path / 'wrong' / 'params.json'}: {says}" in err and "--gamma" not in err
    P, Q = write_incontexttd_log(tmp_path / "nan")
    P[2, 0, 1, 1] = np.nan
    np.savez(tmp_path / "nan" / "data.npz", xs=np.arange(1, 5) * 10, P=P, Q=Q)
    assert "data.npz: 1 of 4 stored weight sets hold NaN or inf (first at logged step 30)" in error(
        str(tmp_path / "nan"), "--out", str(tmp_path / "o")
    )
    assert main(["import-incontexttd", str(tmp_path / "log"), "--out", str(tmp_path / "o")]) == 0
    write_incontexttd_log(tmp_path / "o" / "log")  # the user's log kept inside an earlier import's folder
    assert "holds the input" in error(
        str(tmp_path / "o" / "log"), "--all-steps", "--out", str(tmp_path / "o"), "--force"
    )
    assert (tmp_path / "o" / "log" / "data.npz").exists()
    assert "another request" in error(str(tmp_path / "log"), "--all-steps", "--out", str(tmp_path / "o"))
    assert (tmp_path / "o" / "model.safetensors").exists()  # nothing already saved is lost


def test_the_runs_own_tasks_are_carried_into_the_import(tmp_path):
    """s, n and mrp_class of params.json become the checkpoint's task distribution; what cannot be carried is
    refused by name."""
    import json

    from ictd_interp.analyses.analyze import resolve
    from ictd_interp.cli import main
    from ictd_interp.io.incontexttd import InContextTDError, read_incontexttd

    write_incontexttd_log(tmp_path / "loop")
    params = json.loads((tmp_path / "loop" / "params.json").read_text())
    (tmp_path / "loop" / "params.json").write_text(json.dumps({**params, "s": 6, "n": 12, "mrp_class": "loop"}))
    assert main(["import-incontexttd", str(tmp_path / "loop"), "--out", str(tmp_path / "o")]) == 0
    config = resolve(tmp_path / "o").config
    assert (config.tasks.n_states, config.tasks.context_len, config.tasks.family) == (6, 12, "loop")
    assert main(["analyze", str(tmp_path / "o"), "--out", str(tmp_path / "a")]) == 0  # their numbers beside ours
    text = (tmp_path / "a" / "summary.md").read_text()
    assert "Their trainer logged at this step, on its one context: alpha 1.040, IWS 0.904, SS 0.804, VD 0.004" in text
    assert "step α = 1.04, their trainer's fitted step" in text
    for extra, word in (({"sample_weight": True}, "sample_weight"), ({"mrp_class": "cartpole"}, "cartpole")):
        (tmp_path / "loop" / "params.json").write_text(json.dumps({**params, **extra}))
        with pytest.raises(InContextTDError, match=word):
            read_incontexttd(tmp_path / "loop")
