import pytest

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.cli import main

gym = pytest.importorskip("gymnasium")


def test_evaluate_cli(tmp_path, capsys):
    from ictd_interp.io.checkpoint import save_checkpoint

    save_checkpoint(HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=2)), tmp_path / "c")
    args = [
        "evaluate",
        str(tmp_path / "c"),
        "--out",
        str(tmp_path / "ev"),
        "--n-tasks",
        "4",
        "--context-len",
        "40",
        "--depth",
        "4",
    ]
    assert main(args + ["--env", "gym:FrozenLake-v1"]) == 0
    assert (tmp_path / "ev" / "evaluation.json").exists()
    assert (tmp_path / "ev" / "figures" / "error_vs_depth.png").exists()
    assert main(args + ["--env", "loop"]) == 2  # another request into the same folder: refused
    assert main(args + ["--env", "loop", "--force"]) == 0
    assert main(args + ["--env", "gym:FrozenLake-v1", "--feature-kind", "onehot", "--force"]) == 2
    assert (
        "one-hot features need d_features >= n_states (4 < 16 states of gym:FrozenLake-v1)" in capsys.readouterr().err
    )
