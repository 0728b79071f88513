"""Shipped pretrained models: they load, their cards tell the truth, and their commands reproduce them."""

import json

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.cli import main
from ictd_interp.config.train import TrainConfig
from ictd_interp.io import pretrained
from ictd_interp.io.checkpoint import CheckpointNotFoundError
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.training.trainer import train
from tests.support.cli import small_evaluate
from tests.support.registry import _check_retrain


def test_depth3_td_s0_reproduces_its_first_1000_steps(tmp_path):
    """The default suite retrains a third of depth3-td-s0 against the weights the card recorded at that step."""
    assert pretrained.card("depth3-td-s0")["prefix_steps"] == 1000
    _check_retrain("depth3-td-s0", tmp_path, steps=1000)


def test_names_and_paths_work_everywhere_and_typos_list_the_known_names(tmp_path, capsys, monkeypatch):
    import ictd_interp.analyses.analyze as analyze_module

    whole = analyze_module.analyze  # a name is resolved before analyze runs: its NEU and figures are tested elsewhere
    monkeypatch.setattr(
        analyze_module, "analyze", lambda *args, **kwargs: whole(*args, **kwargs, neu=False, draw=False)
    )
    assert main(["analyze", "depth3-td-s0", "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "summary.md").exists()
    path = str(pretrained.pretrained_path("depth3-td-s0"))
    assert main(small_evaluate(path, tmp_path / "e")) == 0
    assert main(small_evaluate("depth3-td-s0", tmp_path / "e2")) == 0
    capsys.readouterr()
    assert main(["analyze", "quick-td-s9", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "no such pretrained model" in err and "depth3-td-s0" in err
    with pytest.raises(CheckpointNotFoundError, match="Did you mean .*quick-td-s0"):
        HookedICTDTransformer.from_pretrained("quick-td-s")
    assert main(["models"]) == 0
    assert "depth3-td-s0" in capsys.readouterr().out


def _short_copy(tmp_path):
    """A copy of linear-quick-s0's folder whose card trains 8 steps: its folder, original card and short config."""
    import shutil

    folder = tmp_path / "linear-quick-s0"
    shutil.copytree(pretrained.pretrained_path("linear-quick-s0"), folder)
    card = json.loads((folder / "card.json").read_text())
    short = TrainConfig.from_dict(card["train_config"]).with_flat(
        steps=8, eval_every=4, checkpoint_every=4, n_eval_tasks=8
    )
    (folder / "card.json").write_text(json.dumps({**card, "train_config": short.to_dict()}))
    return folder, card, short


def test_reexport_replaces_a_models_weights_card_and_curves_with_a_fresh_run(tmp_path):
    """What a change of training's bits does to every shipped model: the card's config retrained, its weights,
    curves and final metrics replaced, its name, command and tolerance kept."""
    from ictd_interp.training.retraining import reexport

    folder, card, short = _short_copy(tmp_path)
    entry = reexport(folder, tmp_path / "run")
    model = load_checkpoint(folder).model
    torch.set_num_threads(card["fingerprint"]["threads"])  # as reexport trains it (the suite runs on one thread)
    direct = train(short, tmp_path / "direct", progress=False).model
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), direct.state_dict().values()))
    assert entry["final_metrics"]["step"] == 8 and entry["command"] == card["command"]
    assert entry["final_metrics"]["eval_msve"] == pytest.approx(
        evaluate(model, EvalSet.build(short)).eval_msve, rel=1e-6
    )
    assert json.loads((folder / "card.json").read_text()) == json.loads(json.dumps(entry))
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 3  # steps 0, 4, 8


def test_reexport_takes_a_finished_run_of_the_same_config_and_refuses_any_other(tmp_path):
    """A study's cell of exactly the card's config becomes the shipped weights as they are; a run of other settings,
    or one at another thread count, is refused by name."""
    from ictd_interp.training.retraining import reexport

    folder, card, short = _short_copy(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(card["fingerprint"]["threads"])
    try:
        direct = train(short, tmp_path / "cell", progress=False).model
        train(short.with_flat(lr=short.lr * 2), tmp_path / "other", progress=False)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="other.*trained with other settings than the card's.*lr"):
        reexport(folder, tmp_path / "other", trained=True)
    entry = reexport(folder, tmp_path / "cell", trained=True)
    model = load_checkpoint(folder).model
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), direct.state_dict().values()))
    assert entry["final_metrics"]["step"] == 8
    metrics = tmp_path / "cell" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    metrics.write_text("\n".join(json.dumps({**r, "torch_threads": 7}) for r in rows) + "\n")
    with pytest.raises(ValueError, match="not a finished run at .* thread"):
        reexport(folder, tmp_path / "cell", trained=True)
