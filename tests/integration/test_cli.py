import json
import os
from pathlib import Path

import pytest

from ictd_interp.cli import main
from ictd_interp.config.train import TrainConfig
from tests.support.cli import small_evaluate


def test_construct_cli_and_bad_config(capsys):
    assert main(["construct", "--n-tasks", "2", "--context-len", "20", "--max-depth", "4"]) == 0
    assert "depth L" in capsys.readouterr().out
    assert main(["construct", "--d-features", "4"]) == 2  # one-hot needs d >= n_states
    assert "d_features" in capsys.readouterr().err


def test_train_and_resume_from_the_cli(tmp_path, capsys):
    args = [
        "train",
        "--preset",
        "quick",
        "--out",
        str(tmp_path / "r"),
        "--steps",
        "2",
        "--tasks-per-batch",
        "4",
        "--windows-per-task",
        "2",
        "--n-eval-tasks",
        "4",
        "--eval-every",
        "1",
        "--no-tied",
        "--seed",
        "3",
    ]
    assert main(args) == 0
    config = json.loads((tmp_path / "r" / "train_config.json").read_text())
    assert (config["steps"], config["model"]["tied"], config["seed"], config["model"]["seed"], config["lr"]) == (
        2,
        False,
        3,
        3,
        1e-2,
    )
    assert main(["train", "--resume", str(tmp_path / "r")]) == 0
    assert "finished at step 2" in capsys.readouterr().out
    assert main(args) == 2  # the folder already holds a run
    assert main(["train", "--steps", "2"]) == 2  # no --out


TINY = ["--steps", "2", "--tasks-per-batch", "4", "--windows-per-task", "2", "--n-eval-tasks", "8", "--eval-every", "1"]


def test_reproduce_writes_run_and_analysis_and_never_serves_a_different_request(tmp_path, capsys):
    """One folder through its life (two analyses: each costs seconds): written, refused for other options,
    re-analysed for the same request, and never mistaken for a training folder."""
    out = tmp_path / "quick"
    assert main(["reproduce", "--out", str(out), *TINY]) == 0
    assert (out / "run" / "final" / "model.safetensors").exists()
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    logged = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    # the analysis reads the trained model: its error on the same evaluation tasks is the last logged one
    assert summary["metrics"]["eval_msve"] == pytest.approx(logged[-1]["eval_msve"], rel=1e-6)
    assert logged[-1]["step"] == 2 and summary["config"]["steps"] == 2
    assert f"{summary['metrics']['eval_msve']:.4f}" in (out / "analysis" / "summary.md").read_text()
    assert summary["in_context"]["level"] in capsys.readouterr().out.splitlines()[-1]  # the console's last line
    assert (out / "analysis" / "figures" / "ladder.png").exists()
    assert main(["reproduce", "--out", str(out), *TINY, "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "seed: 0 -> 1" in err and "another --out" in err
    assert main(["reproduce", "--out", str(out), *TINY[:-2], "--eval-every", "2", "--steps", "3"]) == 2
    err = capsys.readouterr().err
    assert "steps: 2 -> 3" in err and "eval_every: 1 -> 2" in err
    (out / "analysis" / "request.json").unlink()  # an analysis written before request.json existed
    assert main(["reproduce", "--out", str(out), *TINY]) == 0  # the same request re-analyses the stored run
    assert (out / "analysis" / "request.json").exists()  # and refreshes the request
    assert main(["train", "--out", str(out), *TINY]) == 2  # a reproduce folder is not a training folder
    assert "not empty and not a training run" in capsys.readouterr().err
    assert main(["train", "--resume", str(out / "run"), "--steps", "350"]) == 2
    assert "steps: 2 -> 350" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(out / "run"), *TINY]) == 2
    assert "is a training run folder" in capsys.readouterr().err


def test_corrupt_run_files_name_the_file(tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["train", "--out", str(run), *TINY, "--checkpoint-every", "1"]) == 0
    (run / "train_config.json").write_text('{"steps": 2,')
    assert main(["train", "--resume", str(run)]) == 2
    assert f"{run / 'train_config.json'}: corrupt or truncated JSON" in capsys.readouterr().err


def test_a_truncated_training_state_falls_back_to_the_previous_checkpoint(tmp_path):
    import shutil

    import pytest

    from ictd_interp.training.trainer import resume, train

    cfg = TrainConfig.from_flat(
        steps=4, tasks_per_batch=4, windows_per_task=2, n_eval_tasks=8, eval_every=2, checkpoint_every=2
    )
    full = train(cfg, tmp_path / "full", progress=False)
    train(cfg, tmp_path / "cut", progress=False)
    shutil.rmtree(tmp_path / "cut" / "final")
    state = tmp_path / "cut" / "checkpoints" / "step_0000004" / "training_state.pt"
    state.write_bytes(state.read_bytes()[:100])
    with pytest.warns(UserWarning, match="step_0000004: unusable checkpoint.*set aside as unusable_step_0000004"):
        resumed = resume(tmp_path / "cut", progress=False)
    assert resumed.step == 4
    kept = tmp_path / "cut" / "checkpoints" / "unusable_step_0000004" / "training_state.pt"
    assert len(kept.read_bytes()) == 100  # the cut file is kept as it was, beside the re-written step_0000004
    assert all((a == b).all() for a, b in zip(full.model.parameters(), resumed.model.parameters()))
    for garbled in (b"", b"not a pickle at all"):  # torch.load raises other errors on these
        shutil.rmtree(tmp_path / "cut" / "final")
        state.write_bytes(garbled)
        with pytest.warns(UserWarning, match="step_0000004: unusable checkpoint"):
            assert resume(tmp_path / "cut", progress=False).step == 4


def test_a_request_that_cannot_run_clears_nothing_even_forced(tmp_path, capsys):
    """The model, its features and --out are checked before the output folder is claimed: a bad input with
    --force leaves the earlier results, the checkpoint it names and a user's files as they were."""
    import numpy as np

    from ictd_interp.io.checkpoint import save_checkpoint
    from tests.conftest import make_star

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "request.json").write_text(json.dumps({"command": "analyze", "source": "depth3-td-s1"}))
    (earlier / "summary.md").write_text("earlier results")
    assert main(["analyze", str(tmp_path / "no-such-model"), "--out", str(earlier), "--force"]) == 2
    assert "no-such-model" in capsys.readouterr().err
    assert (earlier / "summary.md").read_text() == "earlier results"

    save_checkpoint(make_star(), tmp_path / "ck")
    assert main(["evaluate", str(tmp_path / "ck"), "--out", str(tmp_path / "ck"), "--force"]) == 2
    assert "holds the input" in capsys.readouterr().err and (tmp_path / "ck" / "model.safetensors").exists()

    common = [
        "evaluate",
        "depth3-td-s0",
        "--n-tasks",
        "4",
        "--context-len",
        "20",
        "--depth",
        "2",
        "--out",
        str(earlier),
        "--force",
        "--features",
    ]
    bad = np.full((10, 4), 0.5)
    bad[2, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    np.save(tmp_path / "huge.npy", np.full((10, 4), 1e200))
    (tmp_path / "text.npy").write_text("0.1 0.2\n")
    np.save(tmp_path / "bool.npy", np.ones((10, 4), dtype=bool))
    for name, says in (
        ("nan.npy", "must be finite numbers (1 entries are NaN or inf)"),
        ("bool.npy", "must be real numbers, got dtype bool"),
        ("huge.npy", "inner products (the attention scores) overflow float64"),
        ("text.npy", "not a .npy file"),
    ):
        assert main([*common, str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / name}: " in err and says in err and "Traceback" not in err
    np.save(tmp_path / "shape.npy", np.zeros((3, 4)))
    assert main([*common, str(tmp_path / "shape.npy")]) == 2
    assert f"{tmp_path / 'shape.npy'}: features: expected shape" in capsys.readouterr().err
    assert (earlier / "summary.md").read_text() == "earlier results"

    (tmp_path / "afile").write_text("x")
    assert main(["train", "--preset", "quick", "--steps", "2", "--out", str(tmp_path / "afile" / "run")]) == 2
    err = capsys.readouterr().err
    assert "afile" in err and "Traceback" not in err


def test_settings_stored_beside_weights_are_blamed_on_their_file(tmp_path, capsys):
    """A corrupt setting in a checkpoint's config.json names that file, not a flag the user never typed."""
    from ictd_interp.io.checkpoint import save_checkpoint
    from tests.conftest import make_star

    save_checkpoint(make_star(), tmp_path / "ck", task={"context_len": -1})
    assert main(["analyze", str(tmp_path / "ck"), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'ck' / 'config.json'}: the stored training settings are invalid" in err
    assert "--context-len" not in err and not (tmp_path / "a").exists()
    header = json.loads((tmp_path / "ck" / "config.json").read_text())
    header["architecture"] = "foo"
    (tmp_path / "ck" / "config.json").write_text(json.dumps(header))
    assert main(["analyze", str(tmp_path / "ck"), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'ck' / 'config.json'}: the stored architecture" in err and "--architecture" not in err


def test_evaluate_validates_its_numbers_and_never_overwrites_another_request(tmp_path, capsys):
    common = ["evaluate", "depth3-td-s0", "--n-tasks", "4", "--context-len", "20", "--depth", "2"]
    assert main([*common, "--n-tasks", "0", "--out", str(tmp_path / "z")]) == 2
    assert "--n-tasks: must be an integer >= 2, got 0" in capsys.readouterr().err
    assert main([*common, "--env", "gym:NotAnEnv-v0", "--out", str(tmp_path / "g")]) == 2
    assert "no such Gymnasium environment" in capsys.readouterr().err
    assert main([*common, "--feature-kind", "onehot", "--n-states", "10", "--out", str(tmp_path / "o")]) == 2
    assert "depth3-td-s0: the model's one-hot features need d_features >= n_states (4 < 10" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--threads", "0", "--out", str(tmp_path / "t")])
    assert "--threads: must be a whole number >= 1" in capsys.readouterr().err
    assert main([*common, "--env", "loop", "--out", str(tmp_path / "e")]) == 0
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert result["context_lengths"][-1] == 20 and "terminal" not in result["settings"]
    assert "baselines" in result and (tmp_path / "e" / "evaluation.md").exists()
    assert main([*common, "--env", "random", "--out", str(tmp_path / "e")]) == 2
    assert "env: 'loop' -> 'random'" in capsys.readouterr().err
    assert json.loads((tmp_path / "e" / "evaluation.json").read_text())["environment"] == "loop"  # kept
    assert main([*common, "--env", "random", "--out", str(tmp_path / "e"), "--force"]) == 0


def test_evaluate_decides_by_default_and_its_last_line_names_the_ladder(tmp_path, capsys):
    """The newcomer's case: the deep model on loop chains. 64 tasks could not tell it from the constant; the default
    sample (the ladder's 256) decides, and the console's last line gives the level beside every-visit MC and CE."""
    assert main(["evaluate", "deep-td-s0", "--env", "loop", "--out", str(tmp_path / "e")]) == 0
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert result["n_tasks"] == 256 and result["in_context"]["learns_in_context"] is True
    assert result["in_context"]["level"] == "learns in context"  # at n = 30 run deeper its error rises past CE
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "learns in context (n = 400, 768 layers: MSVE" in line and "every-visit MC" in line and "CE " in line
    assert (tmp_path / "e" / "figures" / "ladder.png").stat().st_size > 0


def running(monkeypatch, cli, runs: dict) -> None:
    """The registered commands with ``runs[name]`` in the place of their own function."""
    from dataclasses import replace

    from ictd_interp.cli.command import registered

    found = [replace(c, run=runs.get(c.name, c.run)) for c in registered()]
    monkeypatch.setattr(cli, "registered", lambda: found)


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    from ictd_interp import cli

    def interrupted(args):
        raise KeyboardInterrupt

    running(monkeypatch, cli, {"analyze": interrupted, "evaluate": interrupted})
    assert cli.main(["analyze", "depth3-td-s0", "--out", str(tmp_path / "a")]) == 130
    assert cli.main(["evaluate", "depth3-td-s0", "--env", "loop", "--out", str(tmp_path / "e")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("ictd-interp ") and "interrupted (Ctrl-C)" in line for line in err)


def test_every_command_takes_threads_and_defaults_to_one(monkeypatch, tmp_path):
    import torch

    from ictd_interp import cli

    seen = {}
    running(monkeypatch, cli, {"analyze": lambda args: seen.setdefault("threads", torch.get_num_threads()) and 0})
    torch.set_num_threads(2)
    assert cli.main(["analyze", "depth3-td-s0", "--out", str(tmp_path / "a")]) == 0 and seen["threads"] == 1
    parser = cli.build_parser()
    for name, command in next(a for a in parser._actions if a.dest == "command").choices.items():
        assert any("--threads" in a.option_strings for a in command._actions), name


@pytest.mark.slow  # 32 s; analyze's and evaluate's own tests in this file run by default
def test_analyze_without_the_stamp_and_evaluate_lays_out_its_figures_as_analyze(tmp_path):
    from PIL import Image

    assert main(["analyze", "depth3-td-s0", "--out", str(tmp_path / "a"), "--no-stamp"]) == 0
    assert main(["analyze", "depth3-td-s0", "--out", str(tmp_path / "b")]) == 0

    def corner(folder: str) -> list:  # the stamp's place, top left, on white
        image = Image.open(tmp_path / folder / "figures" / "signature.png").convert("RGBA")
        white = Image.new("RGBA", image.size, "white")
        return list(Image.alpha_composite(white, image).convert("L").crop((0, 0, 60, 10)).getdata())

    assert min(corner("a")) > 200 and min(corner("b")) < 200  # blank without the stamp, its text with it
    request = json.loads((tmp_path / "a" / "request.json").read_text())
    assert request.get("stamp") is False
    assert main(small_evaluate("depth3-td-s0", tmp_path / "e", context_len=12, depth=3)) == 0
    assert (tmp_path / "e" / "figures" / "error_vs_depth.png").exists()
    assert not (tmp_path / "e" / "error_vs_depth.png").exists()


def test_a_users_hooks_py_and_analyses_py_shadow_nothing(tmp_path):
    """``hooks`` and ``analyses`` install inside ``ictd_interp``: a user's own ``hooks.py`` or ``analyses.py`` in the
    working directory is theirs, and the toolkit's command and imports still find the toolkit's packages."""
    import subprocess
    import sys

    for name in ("hooks", "analyses"):
        (tmp_path / f"{name}.py").write_text("raise SystemExit('a user file was imported by the toolkit')\n")
    check = (
        "import ictd_interp.analyses.metrics, ictd_interp.hooks, sys; "
        "print(ictd_interp.hooks.__file__); assert 'hooks' not in sys.modules and 'analyses' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).resolve() == Path(__file__).resolve().parents[2] / "hooks" / "__init__.py"
    listing = subprocess.run(
        [sys.executable, "-m", "ictd_interp.cli", "models"], cwd=tmp_path, capture_output=True, text=True
    )
    assert listing.returncode == 0 and "quick-td-s0" in listing.stdout, listing.stderr
    own = subprocess.run([sys.executable, "-c", "import hooks"], cwd=tmp_path, capture_output=True, text=True)
    assert own.returncode == 1 and "a user file was imported" in own.stderr  # the user's file is theirs to import


def test_ctrl_c_while_analyze_draws_leaves_nothing_half_written(monkeypatch, capsys, tmp_path):
    """Interrupted once summary.json and every figure are written, before summary.md: the output folder holds
    none of them, and no staging folder (only what the command wrote before the work, so the same command starts
    again)."""
    from ictd_interp import cli
    from ictd_interp.analyses import analyze as analyze_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(analyze_module, "write_with_figures", interrupted)
    out = tmp_path / "a"
    assert cli.main(["analyze", "depth3-td-s0", "--out", str(out)]) == 130
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert not any(name.startswith(("summary", "figures/", ".staged")) for name in left), left
    assert "interrupted (Ctrl-C)" in capsys.readouterr().err


def test_a_mistyped_flag_is_named_before_a_missing_required_one(capsys):
    """``--otu DIR`` is a typo of ``--out``: the error names it, not the absent ``--out``."""
    from ictd_interp.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["analyze", "quick-td-s0", "--otu", "somewhere"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--otu (did you mean --out?)" in err and "required" not in err
    with pytest.raises(SystemExit):
        main(["analyze", "quick-td-s0"])
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_evaluate_names_the_gamma_flag_the_user_typed(tmp_path, capsys):
    from ictd_interp.cli import main

    assert main(["evaluate", "quick-td-s0", "--env", "boyan", "--gamma", "0.5", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ictd-interp evaluate: error: --gamma: 0.5, but") and "trained at gamma = 0.9" in err
    assert not (tmp_path / "e").exists()  # refused before --out is claimed


def test_study_help_and_dry_run_say_what_a_study_costs_before_it_runs(capsys):
    from ictd_interp.cli import main

    with pytest.raises(SystemExit):
        main(["study", "--help"])
    text = capsys.readouterr().out
    assert "emergence-deep: 30 runs (6 conditions × 5 seeds); 12 min" in text and "built-in studies:" in text
    assert main(["study", "stopped-early-or-td", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "n_layers=12: 2 runs" in out and "4 runs in all" in out
    assert main(["study", "stopped-early-or-td"]) == 2
    assert "--out: a study folder is required" in capsys.readouterr().err


def test_requests_wrong_without_a_model_are_refused_before_torch_loads(tmp_path):
    """Each refusal is one line naming the wrong argument, in a fresh interpreter that never imports torch (it
    costs 18-38 s on a busy machine); a request that passes these checks goes on to the command's own."""
    import subprocess
    import sys

    afile = tmp_path / "afile"
    afile.write_text("")
    requests = [
        (["analyze", "quick-td-sO", "--out", str(tmp_path / "a")], "quick-td-sO: no such pretrained model or path"),
        (["analyze", "runs/nowhere", "--out", str(tmp_path / "a")], "runs/nowhere: no such run folder or checkpoint"),
        (["evaluate", "quick-td-s0", "--env", "nosuch", "--out", str(tmp_path / "e")], "--env: must be one of"),
        (["analyze", "quick-td-s0", "--out", str(afile)], f"--out {afile}: is a file, not a folder"),
        (["study", "nosuch", "--out", str(tmp_path / "s")], "nosuch: no such spec file or built-in study"),
        (["train", "--out", str(afile / "x")], f"{afile} is a file, so no folder can be made under it"),
    ]
    script = (
        "import contextlib, io, sys\nfrom ictd_interp.cli import main\n"
        f"for argv, _ in {requests!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        code = main(argv)\n"
        "    print(code, err.getvalue().strip())\n"
        "print('torch' in sys.modules)\n"
    )
    lines = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    *answers, torch_loaded = lines.strip().splitlines()
    assert torch_loaded == "False"
    for (argv, expected), answer in zip(requests, answers, strict=True):
        assert answer.startswith(f"2 ictd-interp {argv[0]}: error: ") and expected in answer, answer
    assert "Did you mean quick-td-s0" in answers[0]
    # an output folder named after the shipped model it analyses is not taken for the model (the re-run case)
    from argparse import Namespace

    from ictd_interp.cli import all_commands
    from ictd_interp.cli.prechecks import check_request

    (tmp_path / "depth3-td-s0").mkdir()
    (tmp_path / "depth3-td-s0" / "summary.md").write_text("")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        analyze = next(c for c in all_commands() if c.name == "analyze")
        check_request(
            Namespace(command="analyze", path="depth3-td-s0", out="depth3-td-s0"), analyze
        )  # raises if refused
    finally:
        os.chdir(here)
