"""Shipped pretrained models: they load, their cards tell the truth, and their commands reproduce them."""

import pytest
import torch
from safetensors.torch import load_file

from ictd_interp import HookedICTDTransformer, list_pretrained, registry
from ictd_interp.checkpoint import CheckpointNotFoundError, load_checkpoint
from ictd_interp.cli import main
from ictd_interp.evaluation import EvalSet, evaluate
from ictd_interp.train import train
from ictd_interp.train_config import TrainConfig

NAMES = registry.names()
REQUIRED = ["standard-quick-s0", "quick-td-s0", "quick-td-s1", "quick-td-s2", "quick-td-s3", "quick-td-s4", "quick-neu-s0",
            "quick-mc-s0", "quick-full-s0"]


def test_the_registry_ships_the_promised_models():
    assert set(REQUIRED) <= set(NAMES)
    listed = {m["name"]: m for m in list_pretrained()}
    assert listed["quick-td-s0"]["command"].startswith("ictd-interp ")
    assert all(m["description"] for m in listed.values())


@pytest.mark.parametrize("name", NAMES)
def test_every_shipped_model_loads_and_its_card_matches_evaluate(name):
    model = load_checkpoint(registry.pretrained_path(name)).model  # runs checkpoint validation
    assert not model.training
    card = registry.card(name)
    config = TrainConfig.from_dict(card["train_config"])
    assert model.cfg == config.model
    metrics = evaluate(model, EvalSet.build(config)).to_dict()
    assert metrics["eval_msve"] == pytest.approx(card["final_metrics"]["eval_msve"], rel=1e-5)
    for key in ("cos_V", "kernel_diagonality_mean"):  # what the card says about this architecture
        if key in card["final_metrics"]:
            assert metrics[key] == pytest.approx(card["final_metrics"][key], abs=1e-5, nan_ok=True)
    assert ("cos_V" in metrics) == (card["train_config"].get("architecture", "stylised") == "stylised")
    assert card["package_version"] and card["torch_threads"] >= 1


def _retrain_matches(name, tmp_path):
    card = registry.card(name)
    threads = torch.get_num_threads()
    torch.set_num_threads(card["torch_threads"])  # bit-exact holds at the recorded thread count
    try:
        train(TrainConfig.from_dict(card["train_config"]), tmp_path / name, progress=False)
    finally:
        torch.set_num_threads(threads)
    shipped = load_file(str(registry.pretrained_path(name) / "model.safetensors"))
    again = load_file(str(tmp_path / name / "final" / "model.safetensors"))
    assert shipped.keys() == again.keys() and all(torch.equal(shipped[k], again[k]) for k in shipped)


def test_quick_td_s0_is_reproduced_bit_exactly_by_its_recorded_config(tmp_path):
    _retrain_matches("quick-td-s0", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n != "quick-td-s0"])
def test_every_other_model_is_reproduced_bit_exactly(name, tmp_path):
    _retrain_matches(name, tmp_path)


def test_names_and_paths_work_everywhere_and_typos_list_the_known_names(tmp_path, capsys):
    assert main(["analyze", "quick-td-s0", "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "summary.md").exists()
    path = str(registry.pretrained_path("quick-td-s0"))
    assert main(["evaluate", path, "--env", "loop", "--n-tasks", "4", "--context-len", "16", "--depth", "4",
                 "--out", str(tmp_path / "e")]) == 0
    assert main(["evaluate", "quick-td-s0", "--env", "loop", "--n-tasks", "4", "--context-len", "16", "--depth", "4",
                 "--out", str(tmp_path / "e2")]) == 0
    capsys.readouterr()
    assert main(["analyze", "quick-td-s9", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "no such pretrained model" in err and "quick-td-s0" in err
    with pytest.raises(CheckpointNotFoundError, match="Did you mean .*quick-td-s0"):
        HookedICTDTransformer.from_pretrained("quick-td-s")
    assert main(["models"]) == 0
    assert "quick-td-s0" in capsys.readouterr().out


def test_dtype_and_device_on_load():
    model = HookedICTDTransformer.from_pretrained("quick-td-s0", device="cpu", dtype="float64")
    assert model.cfg.dtype == "float64" and model.blocks[0].attn.A.dtype == torch.float64


def test_each_class_loads_only_its_own_architecture():
    from ictd_interp.standard import HookedStandardTransformer

    assert isinstance(HookedStandardTransformer.from_pretrained("standard-quick-s0"), HookedStandardTransformer)
    with pytest.raises(ValueError, match="HookedStandardTransformer.from_pretrained"):
        HookedICTDTransformer.from_pretrained("standard-quick-s0")
    with pytest.raises(ValueError, match="not a standard-architecture model"):
        HookedStandardTransformer.from_pretrained("quick-td-s0")
