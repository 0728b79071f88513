from pathlib import Path

import pytest

from ictd_interp.analyses.commands.configs import ConstructConfig
from ictd_interp.analyses.reports.construction import construction_table
from ictd_interp.cli.args import field_help
from ictd_interp.config import TaskDistribution


def test_construct_shows_geometric_decay_to_a_floor():
    tasks = TaskDistribution(d_features=10, feature_kind="onehot", feature_scale=3.0, context_len=100)
    cfg = ConstructConfig(tasks=tasks, n_tasks=4, max_depth=32)
    table = construction_table(cfg.model, cfg.tasks, cfg.n_tasks, cfg.seed, cfg.max_depth)
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


def test_every_flat_training_setting_is_a_flag_with_its_own_help():
    from ictd_interp.cli import build_parser
    from ictd_interp.config.train import flat_fields

    train = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "train")[1]
    helps = {a.dest: a.help for a in train._actions}
    for name in flat_fields():
        assert name in helps and len(helps[name]) > 20, name
    assert helps["d_model"].startswith("standard architecture:") and helps["mask"].startswith("stylised architecture:")
    assert len({helps[n] for n in flat_fields()}) == len(flat_fields())  # no two settings share a text


def test_field_help_reads_google_docstrings_at_any_indentation():
    class Tabbed:
        """Summary.

        Args:
            alpha: first line
                continued here.
            beta, gamma: shared text.
        """

    assert field_help(Tabbed) == {
        "alpha": "first line continued here.",
        "beta": "shared text.",
        "gamma": "shared text.",
    }


def test_report_sentences_interpret_the_margin():
    from ictd_interp.analyses.reports.stylised_words import margin_sentence
    from ictd_interp.analyses.summary.sections import Margin

    negative = margin_sentence(Margin(model_mean=-0.9, theta_star_mean=-0.88, theta_star_min=-0.95), 1.88, 0.87, 0.9)
    assert "does not apply" in negative and "1 − C = 1.880" in negative
    positive = margin_sentence(Margin(model_mean=0.0, theta_star_mean=0.02, theta_star_min=0.01), 0.98, 0.93, 0.9)
    assert "bounds θ*'s error by a geometric rate" in positive and "0.930" in positive


def test_help_lines_are_distinct_and_presets_are_listed():
    from ictd_interp.cli.flags import preset_help

    text = preset_help()
    assert (
        "quick (stylised: checkpoint_every: 1000 -> 500, lr: 0.001 -> 0.01, model.n_layers: 3 -> 12, model.tied: "
        "False -> True, steps: 4000 -> 1500)"
    ) in text
    assert "paper (stylised: checkpoint_every: 1000 -> 5000" in text and "standard-quick (standard: " in text


def test_an_output_folder_serves_one_request_unless_forced(tmp_path):
    """Same request: reused; another request, a run folder or unknown files: refused, naming the
    difference; --force replaces (clearing what the other request left)."""
    from ictd_interp.io.run_folder import claim_output

    out = tmp_path / "a"
    claim_output(out, {"command": "analyze", "source": "depth3-td-s0"})
    (out / "figures").mkdir()
    claim_output(out, {"command": "analyze", "source": "depth3-td-s0"})  # the same request again
    with pytest.raises(FileExistsError, match=r"another request \(source: 'depth3-td-s0' -> 'depth3-td-s1'\).*--force"):
        claim_output(out, {"command": "analyze", "source": "depth3-td-s1"})
    claim_output(out, {"command": "analyze", "source": "depth3-td-s1"}, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["request.json"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    for force in (False, True):  # files ictd-interp did not write are never cleared, --force or not
        with pytest.raises(FileExistsError, match="holds no request.json") as refused:
            claim_output(tmp_path / "mine", {"command": "evaluate"}, force=force)
        assert "--force" not in str(refused.value)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="afile: is a file, not a folder"):
        claim_output(tmp_path / "afile", {"command": "evaluate"})
    with pytest.raises(ValueError, match="afile is a file, so no folder can be made under it"):
        claim_output(tmp_path / "afile" / "sub", {"command": "evaluate"})
    claims = tmp_path / "claims"  # another command's results (hours of training runs): never replaced by force
    claim_output(claims, {"command": "claims", "budget": "quick"})
    (claims / "studies").mkdir()
    with pytest.raises(FileExistsError, match="holds the results of `claims`, not of `analyze`") as refused:
        claim_output(claims, {"command": "analyze", "source": "x"}, force=True)
    assert "--force" not in str(refused.value) and (claims / "studies").is_dir()
    legacy = tmp_path / "legacy"  # what analyze wrote before request.json existed: replaceable
    (legacy / "figures").mkdir(parents=True)
    (legacy / "summary.json").write_text("{}")
    claim_output(legacy, {"command": "analyze", "source": "x"}, force=True)
    assert sorted(p.name for p in legacy.iterdir()) == ["request.json"]
    (legacy / "request.json").unlink()
    (legacy / "summary.json").write_text("{}")
    (legacy / "run").mkdir()  # ... but not with anything else in it
    with pytest.raises(FileExistsError, match="holds no request.json"):
        claim_output(legacy, {"command": "analyze", "source": "y"}, force=True)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "request.json").write_text("[1]")
    (tmp_path / "odd" / "x").write_text("")
    with pytest.raises(ValueError, match="request.json: not a request"):
        claim_output(tmp_path / "odd", {"command": "analyze"}, force=True)
    out.joinpath("model").mkdir()
    with pytest.raises(ValueError, match="holds the input"):  # the model it reads lives in the folder
        claim_output(out, {"command": "analyze", "source": "x"}, force=True, inputs=[out / "model"])
    assert (out / "model").is_dir()


def test_an_output_folder_named_after_a_shipped_model_never_shadows_it(tmp_path, monkeypatch):
    """``analyze depth3-td-s0 --out depth3-td-s0`` claims ./depth3-td-s0 before reading the model: the name still
    means the shipped model, on the first run and on a re-run; a folder of that name holding a model is used."""
    from ictd_interp.io.pretrained import model_argument, pretrained_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "depth3-td-s0").mkdir()
    (tmp_path / "depth3-td-s0" / "request.json").write_text("{}")  # what claiming the output folder leaves
    assert model_argument("depth3-td-s0") == pretrained_path("depth3-td-s0")
    (tmp_path / "depth3-td-s0" / "config.json").write_text("{}")  # now the folder holds a checkpoint: it is used
    assert model_argument("depth3-td-s0") == Path("depth3-td-s0")
    assert model_argument("my-run") == Path("my-run")  # not a shipped name: the path as given


def test_evaluate_takes_its_task_flags_from_the_task_distribution_and_its_d_from_the_model():
    """The tasks' flags are TaskDistribution's own (one help text each), but for its family (``--env``) and
    d_features (the model's); one-hot features are checked against the model's d when the flags apply."""
    import argparse

    from ictd_interp.analyses.commands.configs import EvaluateConfig
    from ictd_interp.cli import build_parser
    from ictd_interp.cli.args import config_from_args

    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]
    helps = {a.dest: a.help for a in evaluate._actions}
    assert "d_features" not in helps and "family" not in helps
    assert helps["n_states"].startswith(field_help(TaskDistribution)["n_states"])
    assert list(EvaluateConfig().flat()) == [
        "env", "n_tasks", "n_states", "gamma", "context_len", "feature_kind", "feature_scale", "features",
        "terminal", "depth", "seed",
    ]  # fmt: skip
    given = argparse.Namespace(feature_kind="onehot", n_states=10, env="loop")
    cfg = config_from_args(EvaluateConfig.for_model(12, "loop"), given)
    assert (cfg.tasks.family, cfg.tasks.d_features, cfg.tasks.context_len) == ("loop", 12, 200)
    own = config_from_args(EvaluateConfig.for_model(12, "loop", context_len=30, gamma=0.95), given)
    assert (own.tasks.context_len, own.tasks.gamma) == (30, 0.95)  # the model's own n and γ unless asked
    assert helps["context_len"].endswith("(default: the model's)") and helps["gamma"].endswith("(default: the model's)")
    with pytest.raises(ValueError, match=r"^d_features: one-hot features need d_features >= n_states \(4 < 10"):
        config_from_args(EvaluateConfig.for_model(4, "loop"), given)
    with pytest.raises(ValueError, match="^env: must be one of"):
        EvaluateConfig(env="nope")
    with pytest.raises(ValueError, match="n_states: must be an integer >= 2"):
        config_from_args(EvaluateConfig.for_model(4, "random"), argparse.Namespace(n_states=1, env="random"))
    with pytest.raises(ValueError, match="^env: must be one of"):
        EvaluateConfig.for_model(4, "nope")


def test_the_model_files_the_command_line_looks_for_are_the_checkpoints_own():
    """``pretrained.MODEL_FILES`` (torch-free, read before anything loads) names the files a checkpoint and a run
    folder are written with."""
    from ictd_interp.io.checkpoint import CONFIG, WEIGHTS
    from ictd_interp.io.pretrained import MODEL_FILES
    from ictd_interp.io.run_folder import TRAIN_CONFIG

    assert set(MODEL_FILES) == {CONFIG, WEIGHTS, TRAIN_CONFIG}


def test_every_command_is_the_cores_or_registered_once(monkeypatch):
    """The core's commands, then those the analyses register through the entry point; a name twice is refused."""
    from ictd_interp import cli
    from ictd_interp.cli.command import Command

    assert [c.name for c in cli.all_commands()] == [
        *("train", "models", "import-incontexttd", "construct", "reproduce", "analyze", "evaluate"),
        *("study", "study-report", "claims", "methods-benchmark"),
    ]
    monkeypatch.setattr(cli, "registered", lambda: [Command("train", "again", lambda p: None, lambda a: 0)])
    with pytest.raises(ValueError, match=r"\['train'\] are registered twice"):
        cli.all_commands()


def test_an_install_without_the_analyses_entry_point_says_to_reinstall(monkeypatch, capsys):
    """A source tree on PYTHONPATH, or an install from before the entry point: the analyses' commands are missing,
    and asking for one says so in one line, not argparse's bare "invalid choice"."""
    from ictd_interp import cli

    monkeypatch.setattr(cli, "registered", lambda: [])
    with pytest.raises(SystemExit) as stop:
        cli.parse(cli.build_parser(), ["analyze", "depth3-td-s0", "--out", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert "'analyze' is no command of this install" in err and "reinstall the package (pip install -e .)" in err
    assert cli.parse(cli.build_parser(), ["models"]).command == "models"  # the core's commands still run
