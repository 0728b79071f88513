"""Shipped pretrained models: they load, their cards tell the truth, and their commands reproduce them."""

import json
from pathlib import Path

import pytest
import torch

from ictd_interp import HookedICTDTransformer, list_pretrained
from ictd_interp.config.train import TrainConfig
from ictd_interp.io import pretrained, provenance
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.training.retraining import AMPLIFYING_RTOL, within_tolerance
from tests.support.registry import NAMES

REQUIRED = [
    "standard-quick-s0",
    "linear-quick-s0",
    "depth3-td-s0",
    "depth3-td-s1",
    "depth3-td-s2",
    "depth3-td-s3",
    "depth3-td-s4",
    "depth3-neu-s0",
    "depth3-mc-s0",
    "depth3-full-s0",
    "control-quick-s0",
    "quick-td-s0",
    "quick-td-s1",
    "quick-td-s2",
    "flagship-td-s0",
    "flagship-td-s1",
    "flagship-td-s2",
    "deep-td-s0",
    "deep-td-s1",
    "deep-td-s2",
]


def test_the_registry_ships_the_promised_models():
    assert set(REQUIRED) <= set(NAMES)
    listed = {m["name"]: m for m in list_pretrained()}
    assert listed["depth3-td-s0"]["command"].startswith("ictd-interp ")
    assert all(m["description"] for m in listed.values())
    # the presets' own models carry the function-space verdict (ictd_interp.analyses.cards), the depth-3 ones too
    assert all(
        listed[f"{preset}-td-s{seed}"]["learns_in_context"] is not None
        for preset in ("quick", "flagship")
        for seed in range(3)
    )
    assert listed["depth3-td-s0"]["learns_in_context"] is False
    # every card says where on the verdict ladder its model stands: the quick models stop early, the deep ones run TD
    assert {listed[f"quick-td-s{seed}"]["level"] for seed in range(3)} == {"learns in context"}
    assert {listed[f"deep-td-s{seed}"]["level"] for seed in range(3)} == {"runs TD"}
    assert {listed[f"deep-long-td-s{seed}"]["level"] for seed in range(3)} == {"runs TD"}  # trained at n = 100
    assert {listed[f"deep-spectral-td-s{seed}"]["level"] for seed in range(3)} == {"runs TD"}  # 48 layers, n = 100
    assert "clip 1 + spectral penalty 1, 1500 steps" in listed["deep-spectral-td-s0"]["what"]
    assert listed["deep-g97-td-s0"]["level"] == "runs TD"  # γ = 0.97, 192 layers (7 of 10 seeds of its recipe)
    assert {listed[f"deep-g97-384-td-s{seed}"]["level"] for seed in (0, 2, 3)} == {"runs TD"}  # 384 layers: 6 of 6
    assert listed["depth3-td-s0"]["level"] == "does not learn in context"


def test_models_prints_a_table_a_person_reads(capsys):
    """One header, one row per model (name, what, ladder level, MSVE with its interval); --json and --long beside."""
    import json
    from argparse import Namespace

    from ictd_interp.cli.commands import models

    assert models(Namespace(json=False, long=False)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["name", "what"] and "MSVE [95%]" in lines[0]
    row = next(line for line in lines if line.startswith("deep-td-s0 "))
    assert "48 tied layers" in row and "runs TD" in row and "[" in row
    assert max(len(line) for line in lines) <= 100  # the description wraps
    assert models(Namespace(json=True, long=False)) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {m["name"] for m in listed} == set(NAMES)
    assert models(Namespace(json=False, long=True)) == 0
    long = capsys.readouterr().out
    assert "every-visit MC" in long and "Bayes" in long and "gap to Bayes closed" in long


@pytest.mark.parametrize("name", NAMES)
def test_every_shipped_model_loads_and_its_card_matches_evaluate(name):
    model = load_checkpoint(pretrained.pretrained_path(name)).model  # runs checkpoint validation
    assert not model.training
    card = pretrained.card(name)
    config = TrainConfig.from_dict(card["train_config"])
    assert model.cfg == config.model
    metrics = evaluate(model, EvalSet.build(config)).to_dict()
    assert metrics["eval_msve"] == pytest.approx(card["final_metrics"]["eval_msve"], rel=1e-5)
    for key in ("cos_V", "kernel_diagonality_mean"):  # what the card says about this architecture
        if key in card["final_metrics"]:
            assert metrics[key] == pytest.approx(card["final_metrics"][key], abs=1e-5, nan_ok=True)
    assert ("cos_V" in metrics) == (card["train_config"].get("architecture", "stylised") == "stylised")
    assert card["package_version"] and card["torch_threads"] >= 1


def test_every_card_records_what_decides_the_bits():
    for name in NAMES:
        fp = pretrained.card(name)["fingerprint"]
        assert set(fp) >= set(provenance.BIT_DECIDING) and fp["threads"] >= 1, name
        rtol = pretrained.card(name)["cross_machine_rtol"]
        deep = pretrained.card(name)["train_config"]["model"]["n_layers"] >= 48
        assert rtol == AMPLIFYING_RTOL if deep else 0 < rtol <= 1e-2, name


def test_a_retrain_elsewhere_passes_on_weights_and_on_the_eval_msve():
    """The deep cards' 5e-2 on the weights is loose enough for a wrong recipe to slip through; the eval MSVE holds
    it: a drift within tolerance with the eval 2% off fails, and a prefix retrain (no eval) is judged on weights."""
    assert within_tolerance(2.3e-2, 1.1e-3, AMPLIFYING_RTOL)
    assert not within_tolerance(2.3e-2, 2e-2, AMPLIFYING_RTOL)
    assert not within_tolerance(6e-2, 0.0, AMPLIFYING_RTOL)
    assert within_tolerance(4e-7, None, 1e-5) and not within_tolerance(2e-5, None, 1e-5)


def test_a_retrain_is_bit_exact_on_the_same_kernels_and_within_tolerance_elsewhere(monkeypatch, tmp_path):
    """The comparison's two modes, decided by the fingerprint: a tiny drift fails bit-exact and passes the
    tolerance; a large one fails both."""
    here = provenance.fingerprint(threads=1)
    assert provenance.differences(here, dict(here)) == []
    other = {**here, "isa_flags": [*here["isa_flags"], "amx_tile"]}
    assert provenance.differences(other, here) == [f"isa_flags: {other['isa_flags']!r} -> {here['isa_flags']!r}"]
    w = {"a": torch.tensor([2.0, -1.0])}
    ulp = {"a": torch.tensor([2.0 + 2.4e-7, -1.0])}
    drift = provenance.weight_drift(w, ulp)
    assert not drift["bit_equal"] and drift["max_rel"] == pytest.approx(1.2e-7, rel=1e-2)
    assert provenance.weight_drift(w, dict(w))["bit_equal"]


def test_dtype_and_device_on_load():
    model = HookedICTDTransformer.from_pretrained("depth3-td-s0", device="cpu", dtype="float64")
    assert model.cfg.dtype == "float64" and model.blocks[0].attn.A.dtype == torch.float64


def test_each_class_loads_only_its_own_architecture():
    from ictd_interp.models.standard.model import HookedStandardTransformer

    assert isinstance(HookedStandardTransformer.from_pretrained("standard-quick-s0"), HookedStandardTransformer)
    with pytest.raises(ValueError, match="HookedStandardTransformer.from_pretrained"):
        HookedICTDTransformer.from_pretrained("standard-quick-s0")
    with pytest.raises(ValueError, match="not a standard-architecture model"):
        HookedStandardTransformer.from_pretrained("depth3-td-s0")


FLAT_CARDS = json.loads((Path(__file__).parents[1] / "data" / "flat_train_configs.json").read_text())


@pytest.mark.parametrize("name", sorted(FLAT_CARDS))
def test_every_card_of_the_flat_layout_migrates_value_for_value(name):
    """The cards of the release before the nesting (flat ``train_config``, kept in tests/data): every setting
    lands where it belongs, unchanged (the standard model's init_scale was its init_range); the other
    architectures' fields (at their defaults) go; and the migrated config is the one the re-exported card records."""
    from dataclasses import fields

    from ictd_interp.config import MODEL_CONFIGS

    flat = FLAT_CARDS[name]
    assert "model" not in flat  # the old layout
    config = TrainConfig.from_dict(flat)
    nested = config.to_dict()
    values = {**nested["model"], **nested["tasks"], **{k: v for k, v in nested.items() if k not in ("model", "tasks")}}
    renamed = {"init_scale": "init_range"} if config.architecture == "standard" else {}
    dropped = {f.name for a, c in MODEL_CONFIGS.items() if a != config.architecture for f in fields(c)}
    dropped -= set(values) | set(renamed)
    for key, value in flat.items():
        if key not in dropped:
            assert values[renamed.get(key, key)] == value, key
    assert TrainConfig.from_dict(nested) == config == TrainConfig.from_dict(pretrained.card(name)["train_config"])
    assert config.model == load_checkpoint(pretrained.pretrained_path(name)).model.cfg


def test_every_card_command_builds_the_config_the_card_records():
    """The command a card prints is the run it describes: parsed by the CLI, it builds the card's config
    (the stylised ones say ``--backward autograd``: they were trained before the fused backward)."""
    from ictd_interp.cli import build_parser
    from ictd_interp.cli.args import config_from_args
    from ictd_interp.config.train import PRESETS

    for name in NAMES:
        card = pretrained.card(name)
        args = build_parser().parse_args(card["command"].split()[1:])
        assert config_from_args(PRESETS[args.preset], args) == TrainConfig.from_dict(card["train_config"]), name
