import json


from ictd_interp.cli import ConstructConfig, construct, main
from ictd_interp.cli_args import field_help
from ictd_interp.train_config import TrainConfig


def test_construct_shows_geometric_decay_to_a_floor():
    table = construct(ConstructConfig(n_tasks=4, context_len=100, max_depth=32))
    rows = [line.split() for line in table.splitlines() if line.strip()[:1].isdigit()]
    depths, errors = [int(r[0]) for r in rows], [float(r[1]) for r in rows]
    assert depths == [1, 2, 4, 8, 16, 32]
    assert all(a > b for a, b in zip(errors, errors[1:]))  # decays ...
    # ... onto a floor (measured 1.70, 1.36, 1.12, 0.81, 0.57, 0.50): the last doubling of depth
    # gains far less than the first, and the fitted floor is most of the final error.
    assert errors[-2] - errors[-1] < (errors[0] - errors[1]) / 3
    words = next(line for line in table.splitlines() if line.startswith("fitted")).split()
    rate, floor = float(words[3].rstrip(",")), float(words[5].rstrip(";"))
    assert 0.5 < rate < 1.0 and 0.5 * errors[-1] < floor < 1.1 * errors[-1]
    assert "Assumption 5.1 margin C" in table


def test_construct_cli_and_bad_config(capsys):
    assert main(["construct", "--n-tasks", "2", "--context-len", "20", "--max-depth", "4"]) == 0
    assert "depth L" in capsys.readouterr().out
    assert main(["construct", "--d-features", "4"]) == 2  # one-hot needs d >= n_states
    assert "d_features" in capsys.readouterr().err


def test_every_train_config_field_is_a_flag_with_help():
    helps = field_help(TrainConfig)
    for name in TrainConfig.__dataclass_fields__:
        assert helps.get(name), name


def test_train_and_resume_from_the_cli(tmp_path, capsys):
    args = ["train", "--preset", "quick", "--out", str(tmp_path / "r"), "--steps", "2", "--tasks-per-batch", "4",
            "--windows-per-task", "2", "--n-eval-tasks", "4", "--eval-every", "1", "--no-tied", "--seed", "3"]
    assert main(args) == 0
    config = json.loads((tmp_path / "r" / "train_config.json").read_text())
    assert (config["steps"], config["tied"], config["seed"], config["lr"]) == (2, False, 3, 3e-3)
    assert main(["train", "--resume", str(tmp_path / "r")]) == 0
    assert "finished at step 2" in capsys.readouterr().out
    assert main(args) == 2  # the folder already holds a run
    assert main(["train", "--steps", "2"]) == 2  # no --out


def test_reproduce_writes_run_and_analysis(tmp_path):
    args = ["reproduce", "--out", str(tmp_path), "--steps", "2", "--tasks-per-batch", "4", "--windows-per-task", "2",
            "--n-eval-tasks", "8", "--eval-every", "1"]
    assert main(args) == 0
    assert (tmp_path / "run" / "final" / "model.safetensors").exists()
    assert (tmp_path / "analysis" / "summary.md").exists() and (tmp_path / "analysis" / "summary.json").exists()
