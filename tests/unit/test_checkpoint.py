import json

import pytest
import torch
from safetensors.torch import save_file

from ictd_interp import HookedICTDTransformer
from ictd_interp.io.checkpoint import CheckpointError, CheckpointNotFoundError, save_checkpoint
from ictd_interp.models.loading import load_checkpoint
from tests.conftest import make_cfg, make_tasks


@pytest.mark.parametrize("overrides", [{}, {"form": "dual", "tied": True}, {"dtype": "float32", "mask": "full"}])
def test_round_trip_is_bit_exact(tmp_path, overrides):
    model = HookedICTDTransformer(make_cfg(init_scale=0.3, **overrides))
    save_checkpoint(model, tmp_path / "ckpt", step=7, note="hi")
    loaded, meta = load_checkpoint(tmp_path / "ckpt")
    assert meta == {"step": 7, "note": "hi"} and loaded.cfg == model.cfg
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name])
    prompt = make_tasks().prompt
    assert torch.equal(model(prompt), loaded(prompt))
    again = HookedICTDTransformer.from_pretrained(tmp_path / "ckpt" / "model.safetensors")
    assert torch.equal(again(prompt), model(prompt))


def test_overwrite_replaces_and_leaves_no_temporaries(tmp_path):
    a, b = HookedICTDTransformer(make_cfg(seed=1)), HookedICTDTransformer(make_cfg(seed=2))
    save_checkpoint(a, tmp_path / "c")
    save_checkpoint(b, tmp_path / "c")
    assert torch.equal(load_checkpoint(tmp_path / "c").model.blocks[0].attn.V, b.blocks[0].attn.V)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    model = HookedICTDTransformer(make_cfg(seed=1))
    save_checkpoint(model, tmp_path / "c")
    with pytest.raises(TypeError, match="metadata"):
        save_checkpoint(HookedICTDTransformer(make_cfg(seed=2)), tmp_path / "c", bad=object())
    assert torch.equal(load_checkpoint(tmp_path / "c").model.blocks[0].attn.V, model.blocks[0].attn.V)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_missing(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


def test_truncated_weights(tmp_path):
    save_checkpoint(HookedICTDTransformer(make_cfg()), tmp_path / "c")
    weights = tmp_path / "c" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-40])
    with pytest.raises(CheckpointError, match="corrupt or truncated weights"):
        load_checkpoint(tmp_path / "c")


def test_truncated_config(tmp_path):
    save_checkpoint(HookedICTDTransformer(make_cfg()), tmp_path / "c")
    cfg = tmp_path / "c" / "config.json"
    cfg.write_text(cfg.read_text()[:30])
    with pytest.raises(CheckpointError, match="corrupt or truncated JSON"):
        load_checkpoint(tmp_path / "c")


def test_foreign_folders(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="foreign"):
        load_checkpoint(tmp_path / "hf")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not an ictd-interp checkpoint"):
        load_checkpoint(tmp_path / "empty")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(CheckpointError, match="not an ictd-interp checkpoint"):
        load_checkpoint(tmp_path / "file.txt")


def test_config_mismatch(tmp_path):
    save_checkpoint(HookedICTDTransformer(make_cfg()), tmp_path / "c")
    header = json.loads((tmp_path / "c" / "config.json").read_text())
    header["config"]["d_features"] = 5
    (tmp_path / "c" / "config.json").write_text(json.dumps(header))
    with pytest.raises(CheckpointError, match="config mismatch: blocks.0.attn.A has shape"):
        load_checkpoint(tmp_path / "c")
    header["config"]["d_features"] = 3
    header["config"]["n_layers"] = 3
    (tmp_path / "c" / "config.json").write_text(json.dumps(header))
    with pytest.raises(CheckpointError, match="config mismatch: weights missing"):
        load_checkpoint(tmp_path / "c")
    header["config"]["form"] = "quad"
    (tmp_path / "c" / "config.json").write_text(json.dumps(header))
    with pytest.raises(CheckpointError, match="config mismatch.*form"):
        load_checkpoint(tmp_path / "c")


def test_weights_outside_the_training_mask_are_a_mismatch(tmp_path):
    model = HookedICTDTransformer(make_cfg())
    save_checkpoint(model, tmp_path / "c")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights["blocks.1.attn.A"][0, -1, -1] = 1.0
    save_file(weights, str(tmp_path / "c" / "model.safetensors"))
    with pytest.raises(CheckpointError, match="training mask"):
        load_checkpoint(tmp_path / "c")
